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

from sqlalchemy import TextClause, text
from sqlalchemy.ext.asyncio import AsyncSession

from app.memory.store.rows import lock_owners
from app.models.memory import VECTOR_INDEX, VECTOR_INDEX_DIMENSIONS

CROWD_K = 10  # neighbours a figure is taken over (ten: see FUSION in rows.py)
FEWER = -2.0  # the floor of a row with fewer than CROWD_K others: any new vector enters

# The statements run once for each kind of vector: those the covering index holds (migration
# 0021), whose neighbours are compared from it (an index-only scan of the person's entries in
# place of a table page each), and longer ones, compared from the table.
_KINDS = (
    (f"vector_dims(x.embedding) <= {VECTOR_INDEX_DIMENSIONS}", f" AND {VECTOR_INDEX}"),
    (f"vector_dims(x.embedding) > {VECTOR_INDEX_DIMENSIONS}", ""),
)

_FIGURES = """
UPDATE memories AS t SET crowd = f.crowd, crowd_floor = f.floor
FROM (
    SELECT x.id, coalesce(avg(n.similarity), 0) AS crowd,
           CASE WHEN count(n.similarity) < :k THEN :fewer ELSE min(n.similarity) END AS floor
    FROM memories x LEFT JOIN LATERAL (
        SELECT 1 - (x.embedding <=> embedding) AS similarity FROM memories
        WHERE user_id = x.user_id AND embedding_space = x.embedding_space AND id <> x.id{index}
        ORDER BY similarity DESC LIMIT :k
    ) AS n ON true
    WHERE x.id = ANY(CAST(:ids AS bigint[])) AND x.embedding IS NOT NULL AND {kind}
    GROUP BY x.id
) AS f
WHERE t.id = f.id
"""

# Rows a new vector (x) is nearer to than their floor: it is one of their nearest now. (OFFSET
# 0: with the comparison kept out of the scan, the planner reads all the person's entries in
# one pass of the index, as it must, rather than a table page for each.)
_NEIGHBOURS_WAIT = """
UPDATE memories SET crowd_floor = NULL
WHERE id IN (
    SELECT n.id FROM memories x CROSS JOIN LATERAL (
        SELECT id, crowd_floor, 1 - (embedding <=> x.embedding) AS similarity FROM memories
        WHERE user_id = x.user_id AND embedding_space = x.embedding_space
          AND id <> ALL(CAST(:ids AS bigint[])) AND crowd_floor IS NOT NULL{index}
        OFFSET 0
    ) AS n
    WHERE x.id = ANY(CAST(:ids AS bigint[])) AND x.embedding IS NOT NULL AND {kind}
      AND n.similarity > n.crowd_floor
)
"""


def _each_kind(template: str) -> tuple[TextClause, ...]:
    return tuple(text(template.format(kind=kind, index=index)) for kind, index in _KINDS)


FIGURES, NEIGHBOURS_WAIT = _each_kind(_FIGURES), _each_kind(_NEIGHBOURS_WAIT)

_WAITING = text(
    "SELECT id, user_id FROM memories WHERE embedding IS NOT NULL AND crowd_floor IS NULL "
    "ORDER BY user_id, id LIMIT :limit"
)


async def settle(session: AsyncSession, ids: Sequence[int]) -> None:
    """After ``ids`` got their vectors (the owners' locks held): their own figures, and the
    rows whose nearest they joined put back to wait for the back-fill."""
    if not ids:
        return
    for statement in NEIGHBOURS_WAIT:
        await session.execute(statement, {"ids": list(ids)})
    await _figures(session, ids)


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
    return await _figures(session, [int(row_id) for row_id, _ in rows])


async def _figures(session: AsyncSession, ids: Sequence[int]) -> int:
    """The figures of ``ids`` (those with a vector); how many."""
    done = 0
    for statement in FIGURES:
        result = await session.execute(statement, {"ids": list(ids), "k": CROWD_K, "fewer": FEWER})
        done += int(getattr(result, "rowcount", 0))
    return done


async def waiting(session: AsyncSession) -> int:
    """How many rows wait for their figure (the back-fill's metric)."""
    statement = text(
        "SELECT count(*) FROM memories WHERE embedding IS NOT NULL AND crowd_floor IS NULL"
    )
    return int(await session.scalar(statement) or 0)
