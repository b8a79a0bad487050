"""MEM-05: a channel's episodes (rolling summaries): the one owner of `episodes`. The newest
are kept, the oldest dropped past the cap."""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import UnaryExpression, delete, select
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.ext.asyncio import AsyncSession

from app.kit.sql import any_array, replace_mentions_in
from app.models.structured import Episode


@dataclass(frozen=True, slots=True)
class EpisodeRecord:
    id: int
    channel_id: int
    content: str
    created_at: datetime
    source_user_ids: frozenset[int] | None = None  # None: made before provenance


def _record(row: Episode) -> EpisodeRecord:
    sources = frozenset(row.source_user_ids) if row.source_user_ids is not None else None
    return EpisodeRecord(row.id, row.channel_id, row.content, row.created_at, sources)


def _newest_first() -> tuple[UnaryExpression[Any], ...]:
    # created_at ties inside one transaction (now() is fixed), so the id breaks them.
    return (Episode.created_at.desc(), Episode.id.desc())


async def add_episode(
    session: AsyncSession,
    channel_id: int,
    content: str,
    cap: int,
    guild_id: int | None = None,
    *,
    sources: Collection[int],
) -> int:
    """Insert an episode made from ``sources``' words (provenance) and drop the channel's
    oldest beyond ``cap`` (the new one stays); the new episode's id."""
    episode = Episode(
        channel_id=channel_id,
        guild_id=guild_id,
        content=content,
        source_user_ids=sorted(set(sources)),
    )
    session.add(episode)
    await session.flush()
    await drop_beyond_cap(session, channel_id, cap)
    return episode.id


async def drop_beyond_cap(session: AsyncSession, channel_id: int, cap: int) -> int:
    """Delete all but the newest ``cap`` episodes of the channel; how many went."""
    keep = (
        select(Episode.id)
        .where(Episode.channel_id == channel_id)
        .order_by(*_newest_first())
        .limit(max(cap, 1))
    )
    result = await session.execute(
        delete(Episode)
        .where(Episode.channel_id == channel_id, Episode.id.not_in(keep))
        .returning(Episode.id)
    )
    return len(result.scalars().all())


async def recent_episodes(
    session: AsyncSession, channel_id: int, limit: int
) -> list[EpisodeRecord]:
    """The channel's newest ``limit`` episodes, newest first."""
    query = (
        select(Episode)
        .where(Episode.channel_id == channel_id)
        .order_by(*_newest_first())
        .limit(limit)
    )
    return [_record(row) for row in await session.scalars(query)]


async def delete_made_from(session: AsyncSession, user_id: int) -> int:
    """Delete the episodes whose recorded inputs include the person (an erasure)."""
    result = await session.execute(
        delete(Episode).where(Episode.source_user_ids.contains([user_id])).returning(Episode.id)
    )
    return len(result.all())


async def delete_legacy_where(
    session: AsyncSession, channel_ids: Collection[int], doomed: Callable[[str], bool]
) -> int:
    """Delete the episodes made before provenance, in these channels, whose text ``doomed``
    picks (MEM-09, confined: an old summary of a channel the person spoke in that names them
    by a distinctive name theirs alone). An episode with recorded inputs is never read here.
    Episodes are capped per channel, so this reads at most the cap per channel."""
    if not channel_ids:
        return 0
    rows = await session.execute(
        select(Episode.id, Episode.content).where(
            Episode.source_user_ids.is_(None), Episode.channel_id == any_array(channel_ids)
        )
    )
    ids = [episode_id for episode_id, content in rows.tuples() if doomed(content)]
    if not ids:
        return 0
    result = await session.execute(delete(Episode).where(Episode.id.in_(ids)).returning(Episode.id))
    return len(result.all())


async def replace_mentions(session: AsyncSession, user_id: int, token: str) -> int:
    """Replace the person's mentions in every episode (a capped table)."""
    return await replace_mentions_in(session, Episode.content, user_id, token)


async def existing(session: AsyncSession, channel_ids: Collection[int]) -> set[tuple[int, str]]:
    """(channel, text) of the episodes these channels already have (an import)."""
    rows = await session.execute(
        select(Episode.channel_id, Episode.content).where(
            Episode.channel_id == any_array(channel_ids)
        )
    )
    return {(channel_id, content) for channel_id, content in rows}


async def insert_many(session: AsyncSession, rows: Sequence[dict[str, Any]]) -> int:
    if not rows:
        return 0
    statement = insert(Episode).on_conflict_do_nothing().returning(Episode.id)
    return len((await session.execute(statement, list(rows))).all())
