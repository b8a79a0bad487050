"""What may be learned about whom: the memory system is on (MEM-10), the person has not paused
learning, and, with MEMORY_LEARN_FROM=addressed, they addressed the bot lately. While a person
is paused nothing new is learned about them (the write path asks before anything else and
again under the person's lock); what is already remembered still serves their replies."""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy.ext.asyncio import AsyncSession

from app.channel.store import addressed_recently
from app.config import LearnFrom, Settings
from app.consent.store import paused_among, paused_since


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
