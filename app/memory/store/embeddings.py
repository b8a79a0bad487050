"""The memories' vectors: which wait for one of the current space, and writing them back
(only onto the text they were made from). Derived data, like the search tokens: writing one
is not a change of the memory and has no ledger row."""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy.ext.asyncio import AsyncSession

from app.kit import embedded
from app.kit.embedded import EmbeddedTable, Waiting
from app.kit.vectors import Embedding
from app.memory.store import crowds
from app.memory.store.rows import lock_owners

MEMORY_VECTORS = EmbeddedTable("memories")


async def waiting_embeddings(session: AsyncSession, space: str, *, limit: int) -> list[Waiting]:
    return await embedded.waiting(session, MEMORY_VECTORS, space, limit=limit)


async def store_embeddings(session: AsyncSession, rows: Sequence[tuple[Waiting, Embedding]]) -> int:
    """The vectors, and each row's crowd figure (app/memory/store/crowds.py) under its owner's
    lock, as the write path computes it."""
    ids = [row.id for row, _ in rows]
    await lock_owners(session, await crowds.owners_of(session, ids))
    written = await embedded.store(session, MEMORY_VECTORS, rows)
    await crowds.settle(session, ids)
    return written


async def embeddings_waiting(session: AsyncSession, space: str) -> int:
    return await embedded.count_waiting(session, MEMORY_VECTORS, space)
