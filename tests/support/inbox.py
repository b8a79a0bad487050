"""Reading and moving inbox rows in time, so retry tests simulate minutes without sleeping."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import select, text, update

from app.db import SessionFactory
from app.inbound.store import enqueue_due
from app.kit.arqueue import create_queue
from app.models.inbox import InboxEvent


async def inbox_row(sessions: SessionFactory, event_id: str) -> InboxEvent:
    async with sessions() as session:
        row = await session.get(InboxEvent, event_id)
    assert row is not None, f"no inbox row {event_id}"
    return row


async def db_now(sessions: SessionFactory) -> datetime:
    async with sessions() as session:
        now: datetime = (await session.execute(text("SELECT clock_timestamp()"))).scalar_one()
    return now


async def make_due(sessions: SessionFactory, event_id: str) -> None:
    """Move the event's next attempt to now, as if its pause had passed."""
    async with sessions() as session, session.begin():
        scheduled = await session.scalar(
            select(InboxEvent.next_attempt_at).where(InboxEvent.id == event_id)
        )
        assert scheduled is not None, "the event has no next attempt scheduled"
        await session.execute(
            update(InboxEvent)
            .where(InboxEvent.id == event_id)
            .values(next_attempt_at=text("now()"))
        )


async def set_row(sessions: SessionFactory, event_id: str, **values: Any) -> None:
    async with sessions() as session, session.begin():
        await session.execute(update(InboxEvent).where(InboxEvent.id == event_id).values(**values))


async def enqueue_due_now(sessions: SessionFactory, redis_url: str) -> int:
    """One pass of the retry sweeper (the 10 s cron): how many events it found due."""
    queue = create_queue(redis_url)
    try:
        return await enqueue_due(sessions, queue)
    finally:
        await queue.close()
