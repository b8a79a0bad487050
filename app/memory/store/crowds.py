"""Each memory's crowd figure: the mean similarity of its vector to its CROWD_K nearest among
the same person's memories of the same space (`crowd`), and the least of those (`crowd_floor`;
-2 when the person has fewer than CROWD_K others). The meaning leg of recall discounts a memory
by it (app/kit/relevance.py: one of a crowd of look-alike notes says less than a fact that
stands alone), so the read compares the query with each row once and subtracts a column.

Kept off the read's path: computed when a memory gets its vector (the write path, the
back-fill), and a new vector nearer to a row than that row's floor puts the row back to wait
(its nearest changed), as do a deleted or changed vector (migration 0019's triggers). The
back-fill computes what waits. Derived data, like the vector: no ledger row, and it goes with
the row (a delete, an erasure) or with the vector (a changed text).

The figure is taken over all the person's memories of the space, whatever the place a read
may show (a guild read sees only what was learned there): a neighbour the read cannot show
still makes the row one of a crowd, which the tuning half's figures allow (README, "Recall")."""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncSession

from app.memory.store.rows import lock_owners

CROWD_K = 10  # neighbours a figure is taken over (ten: see FUSION in rows.py)
FEWER = -2.0  # the floor of a row with fewer than CROWD_K others: any new vector enters

_FIGURES = text(
    """
UPDATE memories AS t SET crowd = f.crowd, crowd_floor = f.floor
FROM (
    SELECT x.id, coalesce(avg(n.similarity), 0) AS crowd,
           CASE WHEN count(n.similarity) < :k THEN :fewer ELSE min(n.similarity) END AS floor
    FROM memories x LEFT JOIN LATERAL (
        SELECT 1 - (x.embedding <=> y.embedding) AS similarity FROM memories y
        WHERE y.user_id = x.user_id AND y.embedding_space = x.embedding_space AND y.id <> x.id
        ORDER BY similarity DESC LIMIT :k
    ) AS n ON true
    WHERE x.id = ANY(CAST(:ids AS bigint[])) AND x.embedding IS NOT NULL
    GROUP BY x.id
) AS f
WHERE t.id = f.id
"""
)

# Rows a new vector is nearer to than their floor: it is one of their nearest now.
_NEIGHBOURS_WAIT = text(
    """
UPDATE memories AS x SET crowd_floor = NULL
FROM memories AS n
WHERE n.id = ANY(CAST(:ids AS bigint[])) AND n.embedding IS NOT NULL
  AND x.user_id = n.user_id AND x.embedding_space = n.embedding_space
  AND x.id <> ALL(CAST(:ids AS bigint[])) AND x.crowd_floor IS NOT NULL
  AND 1 - (x.embedding <=> n.embedding) > x.crowd_floor
"""
)

_WAITING = text(
    "SELECT id, user_id FROM memories WHERE embedding IS NOT NULL AND crowd_floor IS NULL "
    "ORDER BY user_id, id LIMIT :limit"
)


async def settle(session: AsyncSession, ids: Sequence[int]) -> None:
    """After ``ids`` got their vectors (the owners' locks held): their own figures, and the
    rows whose nearest they joined put back to wait for the back-fill."""
    if not ids:
        return
    await session.execute(_NEIGHBOURS_WAIT, {"ids": list(ids)})
    await session.execute(_FIGURES, {"ids": list(ids), "k": CROWD_K, "fewer": FEWER})


async def owners_of(session: AsyncSession, ids: Sequence[int]) -> list[int]:
    found = await session.scalars(
        text("SELECT DISTINCT user_id FROM memories WHERE id = ANY(CAST(:ids AS bigint[]))"),
        {"ids": list(ids)},
    )
    return [int(user_id) for user_id in found]


async def refresh(session: AsyncSession, *, limit: int) -> int:
    """Figures for up to ``limit`` rows that wait for one (a vector without it, a changed
    neighbourhood), under their owners' locks; how many."""
    rows = (await session.execute(_WAITING, {"limit": limit})).tuples().all()
    if not rows:
        return 0
    await lock_owners(session, {int(user_id) for _, user_id in rows})
    ids = [int(row_id) for row_id, _ in rows]
    result = await session.execute(_FIGURES, {"ids": ids, "k": CROWD_K, "fewer": FEWER})
    return int(getattr(result, "rowcount", 0))


async def waiting(session: AsyncSession) -> int:
    """How many rows wait for their figure (the back-fill's metric)."""
    statement = text(
        "SELECT count(*) FROM memories WHERE embedding IS NOT NULL AND crowd_floor IS NULL"
    )
    return int(await session.scalar(statement) or 0)
