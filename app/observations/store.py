"""MEM-01's table: the one owner of `observations` (what is learned from gateway events and
read back by consolidation). What becomes an observation is decided in
app/observations/service.py.

An observation keeps only the acting user's own words (a short excerpt) or none at all:
reactions store the emoji, deletes store nothing, so another person's text never lands in a
row filed under someone else (what MEM-09's erasure relies on)."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum

from sqlalchemy import delete, func, select, text, update
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.ext.asyncio import AsyncSession

from app.channel.store import message_authors
from app.kit.sql import any_array, replace_mentions_in
from app.models.structured import Observation

EXCERPT_CHARS = 200
# The user of an event that names nobody (a reaction clear by a moderator, an edit or delete
# of a message we never logged): never a real snowflake, never anyone's profile.
UNKNOWN_USER = 0


class Kind(StrEnum):
    MESSAGE = "message"
    BOT_MESSAGE = "bot_message"
    REACTION_ADD = "reaction_add"
    REACTION_REMOVE = "reaction_remove"
    REACTION_CLEAR = "reaction_clear"
    REACTION_CLEAR_EMOJI = "reaction_clear_emoji"
    EDIT = "edit"
    DELETE = "delete"


def excerpt(text: str, limit: int = EXCERPT_CHARS) -> str:
    """Whitespace collapsed, at most ``limit`` characters (an ellipsis marks a cut)."""
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1].rstrip() + "…"


async def add(
    session: AsyncSession,
    *,
    event_id: str,
    channel_id: int,
    guild_id: int | None,
    user_id: int,
    kind: Kind | str,
    message_id: int | None,
    content: str,
) -> bool:
    """Insert one observation (its content cut to an excerpt); False when ``event_id`` was
    already observed."""
    result = await session.execute(
        insert(Observation)
        .values(
            event_id=event_id,
            channel_id=channel_id,
            guild_id=guild_id,
            user_id=user_id,
            kind=str(kind),
            message_id=message_id,
            content=excerpt(content),
        )
        .on_conflict_do_nothing(index_elements=[Observation.event_id])
        .returning(Observation.id)
    )
    return result.scalar_one_or_none() is not None


async def author_of(session: AsyncSession, message_id: int) -> int:
    return (await message_authors(session, [message_id])).get(message_id, UNKNOWN_USER)


# How far back (newest first) the trigger looks at unconsumed observations: a flood from one
# person cannot push everyone else's out of its view.
TRIGGER_SCAN = 1000

_SHARED_COUNT = text(
    """
    SELECT coalesce(sum(least(n, :share)), 0) FROM (
        SELECT count(*) AS n FROM (
            SELECT user_id FROM observations
            WHERE channel_id = :channel_id AND consumed_at IS NULL
            ORDER BY id DESC LIMIT :scan
        ) AS newest GROUP BY user_id
    ) AS per_person
    """
)


def person_share(every: int) -> int:
    """Pure: how many of one person's observations count towards a trigger of ``every``:
    half of it, rounded up, so (from two on) nobody's traffic alone triggers a consolidation."""
    return (every + 1) // 2


async def should_consolidate(session: AsyncSession, channel_id: int, every: int) -> bool:
    """MEM-02's trigger: at least ``every`` unconsumed observations in the channel, one
    person's (or the bot's) counting for at most ``person_share(every)``: a single person's
    flood of unaddressed messages or reactions never triggers model work by itself, and at
    most halves the wait for the consolidations that others' activity triggers."""
    counted = await session.scalar(
        _SHARED_COUNT,
        {"channel_id": channel_id, "share": person_share(every), "scan": TRIGGER_SCAN},
    )
    return int(counted or 0) >= every


@dataclass(frozen=True, slots=True)
class ObservationRecord:
    id: int
    channel_id: int
    user_id: int
    kind: str
    message_id: int | None
    content: str
    created_at: datetime


async def unconsumed(session: AsyncSession, channel_id: int, limit: int) -> list[ObservationRecord]:
    """The channel's oldest unconsumed observations, oldest first (rides the partial index)."""
    query = (
        select(Observation)
        .where(Observation.channel_id == channel_id, Observation.consumed_at.is_(None))
        .order_by(Observation.id)
        .limit(limit)
    )
    return [
        ObservationRecord(
            o.id, o.channel_id, o.user_id, o.kind, o.message_id, o.content, o.created_at
        )
        for o in await session.scalars(query)
    ]


async def mark_consumed(session: AsyncSession, ids: Sequence[int]) -> int:
    """Mark these observations consumed (once); the number newly marked."""
    if not ids:
        return 0
    result = await session.execute(
        update(Observation)
        .where(Observation.id.in_(list(ids)), Observation.consumed_at.is_(None))
        .values(consumed_at=func.now())
        .returning(Observation.id)
    )
    return len(result.scalars().all())


async def delete_by_user(
    session: AsyncSession, user_id: int, *, after_id: int, limit: int
) -> list[int]:
    """The next ``limit`` observations filed under the person after ``after_id``, deleted
    (an erasure, in batches along their index); their ids, ascending."""
    batch = (
        select(Observation.id)
        .where(Observation.user_id == user_id, Observation.id > after_id)
        .order_by(Observation.id)
        .limit(limit)
    )
    result = await session.scalars(
        delete(Observation).where(Observation.id.in_(batch)).returning(Observation.id)
    )
    return sorted(result)


async def delete_of_messages(session: AsyncSession, message_ids: Collection[int]) -> int:
    """Every observation of these messages (the bot's answers an erasure blanks)."""
    if not message_ids:
        return 0
    result = await session.execute(
        delete(Observation)
        .where(Observation.message_id == any_array(message_ids))
        .returning(Observation.id)
    )
    return len(result.all())


async def delete_in_channels(session: AsyncSession, channel_ids: Collection[int]) -> int:
    """Every observation in these channels (a person's DMs with the bot)."""
    if not channel_ids:
        return 0
    result = await session.execute(
        delete(Observation)
        .where(Observation.channel_id == any_array(channel_ids))
        .returning(Observation.id)
    )
    return len(result.all())


async def replace_mentions(
    session: AsyncSession, message_ids: Collection[int], user_id: int, token: str
) -> int:
    """Replace the person's mentions in the excerpts of these messages' observations."""
    if not message_ids:
        return 0
    where = Observation.message_id == any_array(message_ids)
    return await replace_mentions_in(session, Observation.content, user_id, token, where)
