"""Feedback on the bot's messages (seed 002, "Signals after the reply"): the one owner of
`signals`. Unique (message_id, user_id, kind, value), so a replayed event counts once."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import delete, func, select
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm import aliased

from app.kit.sql import any_array
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
    # Provenance: who gave the feedback, and whose message the rated bot message answered.
    user_id: int = 0
    about_user_id: int | None = None
    guild_id: int | None = None  # where the rated bot message was posted

    @property
    def people(self) -> set[int]:
        return {self.user_id} | ({self.about_user_id} if self.about_user_id else set())


def _guild_feedback(start: datetime, end: datetime, per_person: int) -> Any:
    """The window's feedback on bot messages posted in a guild (never a DM's, nor one on a
    message the log lacks, whose place is unknown): each person's newest ``per_person``."""
    answered = aliased(Message)
    nth = func.row_number().over(
        partition_by=Signal.user_id, order_by=(Signal.created_at.desc(), Signal.id.desc())
    )
    ranked = (
        select(
            Signal.id,
            Signal.kind,
            Signal.value,
            Message.content.label("bot_text"),
            Signal.user_id,
            answered.author_id.label("about_user_id"),
            Message.guild_id,
            Signal.created_at,
            nth.label("nth"),
        )
        .join(Message, Message.id == Signal.message_id)
        .outerjoin(answered, answered.id == Message.reply_to_id)
        .where(Signal.created_at >= start, Signal.created_at < end, Message.guild_id.is_not(None))
        .subquery()
    )
    return select(ranked).where(ranked.c.nth <= per_person).subquery()


async def guild_feedback(
    session: AsyncSession,
    *,
    guild_id: int,
    start: datetime,
    end: datetime,
    per_person: int,
    limit: int,
) -> list[SignalLine]:
    """The guild's newest ``limit`` reactions and corrections of the window, oldest first,
    among each person's newest ``per_person`` of the window in every guild; each with the
    text of the bot message it is about and whom that message answered."""
    kept = _guild_feedback(start, end, per_person)
    query = (
        select(
            kept.c.kind,
            kept.c.value,
            kept.c.bot_text,
            kept.c.user_id,
            kept.c.about_user_id,
            kept.c.guild_id,
        )
        .where(kept.c.guild_id == guild_id)
        .order_by(kept.c.created_at.desc(), kept.c.id.desc())
        .limit(limit)
    )
    rows = (await session.execute(query)).tuples().all()
    return [SignalLine(*row) for row in reversed(rows)]


async def feedback_guilds(
    session: AsyncSession, *, start: datetime, end: datetime, per_person: int, limit: int
) -> list[int]:
    """The guilds with feedback in the window (as ``guild_feedback`` counts it), the most
    first, at most ``limit``."""
    kept = _guild_feedback(start, end, per_person)
    query = (
        select(kept.c.guild_id)
        .group_by(kept.c.guild_id)
        .order_by(func.count().desc(), kept.c.guild_id)
        .limit(limit)
    )
    return list(await session.scalars(query))


async def delete_by_user(
    session: AsyncSession, user_id: int, *, after_id: int, limit: int
) -> list[int]:
    """The person's next ``limit`` reactions and corrections after ``after_id``, deleted (an
    erasure, in batches along their index); their ids, ascending."""
    batch = (
        select(Signal.id)
        .where(Signal.user_id == user_id, Signal.id > after_id)
        .order_by(Signal.id)
        .limit(limit)
    )
    result = await session.scalars(delete(Signal).where(Signal.id.in_(batch)).returning(Signal.id))
    return sorted(result)


async def given_in_windows(
    session: AsyncSession, user_id: int, windows: Sequence[tuple[datetime, datetime]]
) -> set[int]:
    """Which of these windows (by index) hold feedback the person gave."""
    found: set[int] = set()
    for index, (start, end) in enumerate(windows):
        hit = await session.scalar(
            select(Signal.id)
            .where(Signal.user_id == user_id, Signal.created_at >= start, Signal.created_at < end)
            .limit(1)
        )
        if hit is not None:
            found.add(index)
    return found


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
