"""The day's token budgets (DAILY_TOKENS_PER_USER, DAILY_TOKENS_PER_GUILD): input and output
tokens of every purpose, per JST day, read from the usage rows in Postgres (the record the
operator reads too, so the cap and the bill never disagree).

A person's day is a few rows, read fresh for every turn. A guild's day sums every row of its
people that day, so each worker reads it at most every 30 s (``Services.guild_tokens``): the
cap may be passed by what the guild spends meanwhile, a rounding error on a day's budget."""

from __future__ import annotations

from collections.abc import Collection
from datetime import date

from sqlalchemy.ext.asyncio import AsyncSession

from app.db import SessionFactory
from app.kit.clock import jst_day, utcnow
from app.kit.spend import Budget as Budget
from app.kit.spend import current_payer, unwritten_tokens
from app.kit.versioned import VersionedCache
from app.privacy import store as register
from app.services import Services
from app.usage import store

GuildTokens = VersionedCache[tuple[date, int], int]


def exhausted(
    person: int | None, guild: int | None, *, per_user: int | None, per_guild: int | None
) -> Budget | None:
    """Pure: the budget used up by the day's tokens (the person's first), or None. A cap
    that is unset, or a total not read (None), never refuses."""
    if per_user is not None and person is not None and person >= per_user:
        return Budget.PERSON
    if per_guild is not None and guild is not None and guild >= per_guild:
        return Budget.GUILD
    return None


async def over_budget(
    session: AsyncSession,
    day: date,
    *,
    user_id: int,
    guild_id: int | None,
    per_user: int | None,
    per_guild: int | None,
    guild_tokens: GuildTokens,
) -> Budget | None:
    """The budget ``user_id`` (speaking in ``guild_id``; None: a DM, which no guild pays)
    has used up on ``day``, if any. No query for a cap that is unset."""
    person = guild = None
    if per_user is not None:  # what an erasure of theirs took from the rows still counts
        person = await store.person_tokens(session, day, user_id) + await register.kept_tokens(
            session, user_id, day
        )
    if per_guild is not None and guild_id is not None:
        guild = await guild_tokens.get(
            (day, guild_id), lambda: store.guild_tokens(session, day, guild_id)
        )
    return exhausted(person, guild, per_user=per_user, per_guild=per_guild)


async def background_over_budget(
    services: Services, *, guild_id: int | None, people: Collection[int] = ()
) -> Budget | None:
    """The budget spent, if any, for work nobody addressed (consolidation, the memory write
    path, a guild's style revision), checked before it starts: the guild's, and the own budget
    of each of ``people`` who would pay for it (a DM's person, a write path's speaker)."""
    settings = services.settings
    day = jst_day(utcnow())
    async with services.sessions() as session:
        for person in people:
            spent = await over_budget(
                session,
                day,
                user_id=person,
                guild_id=None,
                per_user=settings.daily_tokens_per_user,
                per_guild=None,
                guild_tokens=services.guild_tokens,
            )
            if spent is not None:
                return spent
        if guild_id is None or settings.daily_tokens_per_guild is None:
            return None
        return await over_budget(
            session,
            day,
            user_id=0,
            guild_id=guild_id,
            per_user=None,
            per_guild=settings.daily_tokens_per_guild,
            guild_tokens=services.guild_tokens,
        )


class SpendGate:
    """The check before every chat-model call (the metered client asks it): the budget the
    current payer (``paid_by``) has spent today, counting the usage rows, what an erasure
    kept, and what this job spent so far and has not written yet. No query for a cap that is
    unset, or for a call that is nobody's."""

    def __init__(
        self,
        *,
        sessions: SessionFactory,
        per_user: int | None,
        per_guild: int | None,
        guild_tokens: GuildTokens,
    ) -> None:
        self._sessions = sessions
        self._per_user, self._per_guild = per_user, per_guild
        self._guild_tokens = guild_tokens

    async def spent(self) -> Budget | None:
        payer = current_payer()
        person_capped = self._per_user is not None and payer.user_id is not None
        guild_capped = self._per_guild is not None and payer.guild_id is not None
        if not (person_capped or guild_capped):
            return None
        day = jst_day(utcnow())
        person_unwritten, guild_unwritten = unwritten_tokens(payer, day)
        person = guild = None
        async with self._sessions() as session:
            if person_capped and payer.user_id is not None:
                person = (
                    await store.person_tokens(session, day, payer.user_id)
                    + await register.kept_tokens(session, payer.user_id, day)
                    + person_unwritten
                )
            if guild_capped and payer.guild_id is not None:
                guild_id = payer.guild_id
                written = await self._guild_tokens.get(
                    (day, guild_id), lambda: store.guild_tokens(session, day, guild_id)
                )
                guild = written + guild_unwritten
        return exhausted(person, guild, per_user=self._per_user, per_guild=self._per_guild)
