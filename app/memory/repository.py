"""Thin queries over `memories`, always scoped by the owner's user id."""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import delete, func, insert, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from app.kit.locks import xact_lock
from app.models.memory import Memory

LOCK_NAMESPACE = "memory-user"
RECENT_LIMIT = 10


async def lock_user(session: AsyncSession, user_id: int) -> None:
    """Serialise memory work for one person until this transaction ends."""
    await xact_lock(session, LOCK_NAMESPACE, user_id)


async def recent_memories(
    session: AsyncSession, user_id: int, limit: int = RECENT_LIMIT
) -> list[Memory]:
    """The person's memories, most recently updated first."""
    query = (
        select(Memory)
        .where(Memory.user_id == user_id)
        .order_by(Memory.updated_at.desc(), Memory.id.desc())
        .limit(limit)
    )
    return list((await session.scalars(query)).all())


async def owned_for_update(session: AsyncSession, memory_id: int, user_id: int) -> Memory | None:
    """The row, locked, only when it belongs to ``user_id``; fresh from the database."""
    query = (
        select(Memory)
        .where(Memory.id == memory_id, Memory.user_id == user_id)
        .with_for_update()
        .execution_options(populate_existing=True)
    )
    return (await session.scalars(query)).one_or_none()


async def owned_for_update_many(
    session: AsyncSession, memory_ids: Sequence[int], user_id: int
) -> dict[int, Memory]:
    """The rows among ``memory_ids`` that belong to ``user_id``, locked, in one statement."""
    if not memory_ids:
        return {}
    query = (
        select(Memory)
        .where(Memory.id.in_(memory_ids), Memory.user_id == user_id)
        .order_by(Memory.id)
        .with_for_update()
        .execution_options(populate_existing=True)
    )
    return {memory.id: memory for memory in await session.scalars(query)}


async def insert_memory(
    session: AsyncSession, *, user_id: int, content: str, source: str = "self"
) -> Memory:
    query = (
        insert(Memory)
        .values(user_id=user_id, content=content, source=source)
        .returning(Memory)
        .execution_options(populate_existing=True)
    )
    return (await session.scalars(query)).one()


async def rewrite_memory(session: AsyncSession, memory_id: int, content: str) -> Memory:
    """Replace the text and touch updated_at (what the decay pass reads)."""
    query = (
        update(Memory)
        .where(Memory.id == memory_id)
        .values(content=content, updated_at=func.now())
        .returning(Memory)
        .execution_options(populate_existing=True)
    )
    return (await session.scalars(query)).one()


async def delete_owned(session: AsyncSession, memory_id: int, user_id: int) -> Memory | None:
    """Delete the row only if ``user_id`` owns it; the deleted row, or None."""
    query = (
        delete(Memory)
        .where(Memory.id == memory_id, Memory.user_id == user_id)
        .returning(Memory)
        .execution_options(populate_existing=True)
    )
    return (await session.scalars(query)).one_or_none()


async def delete_all_owned(session: AsyncSession, user_id: int) -> list[Memory]:
    query = (
        delete(Memory)
        .where(Memory.user_id == user_id)
        .returning(Memory)
        .execution_options(populate_existing=True)
    )
    return sorted((await session.scalars(query)).all(), key=lambda m: m.id)
