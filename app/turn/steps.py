"""Durable per-trigger step records: what a turn has already done survives a retried job."""

from __future__ import annotations

from typing import Any

from sqlalchemy import select
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.ext.asyncio import AsyncSession

from app.models import CompletedStep


def step_key(event_id: str, step: str) -> str:
    return f"turn:{event_id}:{step}"


async def done(session: AsyncSession, key: str) -> dict[str, Any] | None:
    """The recorded result of a finished step, or None if it has not happened."""
    row = await session.scalar(select(CompletedStep).where(CompletedStep.key == key))
    return dict(row.result or {}) if row is not None else None


async def done_many(session: AsyncSession, keys: list[str]) -> dict[str, dict[str, Any]]:
    """The recorded results among ``keys`` (missing keys did not happen), in one read."""
    rows = await session.scalars(select(CompletedStep).where(CompletedStep.key.in_(keys)))
    return {row.key: dict(row.result or {}) for row in rows}


async def record(session: AsyncSession, key: str, result: dict[str, Any]) -> dict[str, Any]:
    """Record a step once; a concurrent or earlier record wins and its result is returned."""
    await session.execute(
        insert(CompletedStep).values(key=key, result=result).on_conflict_do_nothing()
    )
    return await done(session, key) or result
