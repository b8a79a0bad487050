"""Consent to be remembered: the one owner of `memory_consent` (who paused learning, since
when). The rules built on it are in app/consent/service.py."""

from __future__ import annotations

from collections.abc import Collection
from datetime import datetime

from sqlalchemy import delete, select
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.ext.asyncio import AsyncSession

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


async def paused_among(session: AsyncSession, user_ids: Collection[int]) -> set[int]:
    """Which of these people are paused (one query, for a batch of speakers)."""
    if not user_ids:
        return set()
    rows = await session.scalars(
        select(MemoryConsent.user_id).where(MemoryConsent.user_id.in_(list(user_ids)))
    )
    return set(rows)
