"""The planner's samples in pg_statistic, searched: where a person's words may linger after
their rows are gone (``app.privacy.samples``)."""

from __future__ import annotations

from collections.abc import Iterable

from sqlalchemy import text

from app.db import SessionFactory


async def sampled(sessions: SessionFactory, needles: Iterable[str]) -> set[tuple[str, str]]:
    """(table or index, column) of every planner statistic that holds one of ``needles``:
    the sampled values of pg_statistic (most common values and elements, histogram bounds)."""
    found: set[tuple[str, str]] = set()
    async with sessions() as session:
        for needle in needles:
            rows = await session.execute(
                text(
                    "SELECT tablename, attname FROM pg_stats WHERE schemaname = 'public' AND "
                    "concat(most_common_vals::text, histogram_bounds::text, "
                    "most_common_elems::text) ILIKE :n"
                ),
                {"n": f"%{needle}%"},
            )
            found.update((table, column) for table, column in rows.tuples())
    return found
