"""MEM-05: a channel's episodes (rolling summaries), newest kept, oldest dropped past the cap."""

from __future__ import annotations

from typing import Any

from sqlalchemy import UnaryExpression, delete, select
from sqlalchemy.ext.asyncio import AsyncSession

from app.models.memory import Episode


def _newest_first() -> tuple[UnaryExpression[Any], ...]:
    # created_at ties inside one transaction (now() is fixed), so the id breaks them.
    return (Episode.created_at.desc(), Episode.id.desc())


async def add_episode(session: AsyncSession, channel_id: int, content: str, cap: int) -> Episode:
    """Insert an episode and drop the channel's oldest beyond ``cap`` (the new one stays)."""
    episode = Episode(channel_id=channel_id, content=content)
    session.add(episode)
    await session.flush()
    await session.refresh(episode)
    await drop_beyond_cap(session, channel_id, cap)
    return episode


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


async def recent_episodes(session: AsyncSession, channel_id: int, limit: int) -> list[Episode]:
    """The channel's newest ``limit`` episodes, newest first."""
    query = (
        select(Episode)
        .where(Episode.channel_id == channel_id)
        .order_by(*_newest_first())
        .limit(limit)
    )
    return list((await session.scalars(query)).all())
