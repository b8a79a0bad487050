"""Consent to be remembered: the one owner of `memory_consent`. While a person is paused,
nothing new is learned about them (the write path asks before anything else and again under
the person's lock); what is already remembered still serves their replies."""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import delete, select
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.ext.asyncio import AsyncSession

from app.channel.log import addressed_recently
from app.config import LearnFrom, Settings
from app.models.consent import MemoryConsent


async def pause(session: AsyncSession, user_id: int) -> bool:
    """Pause learning about the person; False when they were already paused."""
    result = await session.execute(
        insert(MemoryConsent)
        .values(user_id=user_id)
        .on_conflict_do_nothing()
        .returning(MemoryConsent.user_id)
    )
    return result.scalar_one_or_none() is not None


async def resume(session: AsyncSession, user_id: int) -> bool:
    """Learn about the person again; False when they were not paused."""
    result = await session.execute(
        delete(MemoryConsent)
        .where(MemoryConsent.user_id == user_id)
        .returning(MemoryConsent.user_id)
    )
    return result.scalar_one_or_none() is not None


async def paused_since(session: AsyncSession, user_id: int) -> datetime | None:
    """When the person paused learning, or None when learning about them is on."""
    paused: datetime | None = await session.scalar(
        select(MemoryConsent.paused_at).where(MemoryConsent.user_id == user_id)
    )
    return paused


@dataclass(frozen=True, slots=True)
class Learning:
    """The one rule for what may be recorded about a person for memory: the memory system is
    on (MEM-10) and they have not paused learning. Built once at an entry point (an event's
    job) and handed to the writers, which ask it rather than re-deciding."""

    enabled: bool

    @classmethod
    def of(cls, settings: Settings) -> Learning:
        return cls(settings.memory_active)

    async def allows(self, session: AsyncSession, user_id: int) -> bool:
        return self.enabled and await paused_since(session, user_id) is None


async def paused_among(session: AsyncSession, user_ids: Collection[int]) -> set[int]:
    """Which of these people are paused (one query, for a batch of speakers)."""
    if not user_ids:
        return set()
    rows = await session.scalars(
        select(MemoryConsent.user_id).where(MemoryConsent.user_id.in_(list(user_ids)))
    )
    return set(rows)


async def may_learn_about(
    session: AsyncSession,
    user_ids: Collection[int],
    settings: Settings,
    *,
    bot_user_id: int,
    now: datetime,
) -> set[int]:
    """Of these people, whom the nightly run and consolidation may learn about: never a
    paused person, and with MEMORY_LEARN_FROM=addressed only those who addressed the bot in
    the last MEMORY_LEARN_ADDRESSED_DAYS days."""
    allowed = set(user_ids) - await paused_among(session, user_ids)
    if settings.memory_learn_from is LearnFrom.ADDRESSED:
        since = now - timedelta(days=settings.memory_learn_addressed_days)
        allowed &= await addressed_recently(session, allowed, bot_user_id=bot_user_id, since=since)
    return allowed
