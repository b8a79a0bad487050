"""Feedback on the bot's messages (seed 002, "Signals after the reply"): the one owner of
`signals`. Unique (message_id, user_id, kind, value), so a replayed event counts once."""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import delete, select
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.ext.asyncio import AsyncSession

from app.kit.sql import any_array, rewrite_matching
from app.models.messages import Message
from app.models.signals import Signal


async def add_signal(
    session: AsyncSession, *, message_id: int, user_id: int, kind: str, value: str
) -> bool:
    """Insert once; True when new."""
    result = await session.execute(
        insert(Signal)
        .values(message_id=message_id, user_id=user_id, kind=kind, value=value)
        .on_conflict_do_nothing()
        .returning(Signal.id)
    )
    return result.scalar_one_or_none() is not None


@dataclass(frozen=True, slots=True)
class SignalLine:
    kind: str
    value: str
    bot_text: str | None


async def window_signals(
    session: AsyncSession, *, start: datetime, end: datetime, limit: int
) -> list[SignalLine]:
    """The window's newest reactions and corrections, oldest first, each with the text of
    the bot message it is about (when the log has it)."""
    query = (
        select(Signal.kind, Signal.value, Message.content)
        .outerjoin(Message, Message.id == Signal.message_id)
        .where(Signal.created_at >= start, Signal.created_at < end)
        .order_by(Signal.created_at.desc(), Signal.id.desc())
        .limit(limit)
    )
    rows = (await session.execute(query)).all()
    return [SignalLine(kind, value, bot_text) for kind, value, bot_text in reversed(rows)]


async def delete_by_user(session: AsyncSession, user_id: int) -> int:
    result = await session.execute(
        delete(Signal).where(Signal.user_id == user_id).returning(Signal.id)
    )
    return len(result.all())


async def existing(
    session: AsyncSession, ids: Collection[int], message_ids: Collection[int]
) -> tuple[set[int], set[tuple[int, int, str, str]]]:
    """Which of these signal ids exist, and the natural keys on these messages (an import)."""
    found = set(await session.scalars(select(Signal.id).where(Signal.id == any_array(ids))))
    keys = await session.execute(
        select(Signal.message_id, Signal.user_id, Signal.kind, Signal.value).where(
            Signal.message_id == any_array(message_ids)
        )
    )
    return found, {(m, u, k, v) for m, u, k, v in keys}


async def insert_many(session: AsyncSession, rows: Sequence[dict[str, Any]]) -> int:
    """Insert signals as given (an import); ones that exist by now are skipped."""
    if not rows:
        return 0
    statement = insert(Signal).on_conflict_do_nothing().returning(Signal.id)
    return len((await session.execute(statement, list(rows))).all())


async def corrections_by(session: AsyncSession, user_id: int) -> list[str]:
    """The texts of the person's corrections (what a style revision may have quoted)."""
    rows = await session.scalars(
        select(Signal.value).where(Signal.user_id == user_id, Signal.kind == "correction")
    )
    return list(rows)


async def scrub(
    session: AsyncSession, patterns: Sequence[str], rewrite: Callable[[str], str]
) -> int:
    return await rewrite_matching(
        session, table="signals", key="id", column="value", patterns=patterns, rewrite=rewrite
    )
