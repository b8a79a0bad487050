"""Postgres advisory locks on stable 64-bit keys (the Durable Object's single thread)."""

from __future__ import annotations

import hashlib

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncSession


def lock_key(namespace: str, ident: int | str) -> int:
    """A stable signed 64-bit key for ``namespace:ident`` (same on every process)."""
    digest = hashlib.blake2b(f"{namespace}:{ident}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big", signed=True)


async def xact_lock(session: AsyncSession, namespace: str, ident: int | str) -> None:
    """Block until the transaction-scoped lock is ours; released at commit or rollback."""
    await session.execute(
        text("SELECT pg_advisory_xact_lock(:k)"), {"k": lock_key(namespace, ident)}
    )


async def try_xact_lock(session: AsyncSession, namespace: str, ident: int | str) -> bool:
    """Take the transaction-scoped lock if free; False when someone else holds it."""
    result = await session.execute(
        text("SELECT pg_try_advisory_xact_lock(:k)"), {"k": lock_key(namespace, ident)}
    )
    return bool(result.scalar_one())
