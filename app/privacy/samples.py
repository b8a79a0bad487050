"""The planner's samples of people's words. ANALYZE (autovacuum runs it now and then) keeps
sampled values of every column in pg_statistic — whole message and memory texts, token arrays,
vectors, names, frames — until the table is analysed again, which for a large table may be
weeks away, and PostgreSQL 18's pg_dump copies them into every backup. Analysing a table afresh
draws new samples from its live rows only, so rows deleted or rewritten since (an erasure, a
forget, an edit, retention) leave them."""

from __future__ import annotations

import logging
import time

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncSession

from app.db import SessionFactory, unit_of_work

log = logging.getLogger(__name__)

SLICE_S = 0.5  # one transaction's share: a large table takes seconds alone, small ones go together

# The schema's tables after a name (a table added later is included), in name order, and
# whether the bot's role owns each: only the owner (or a member of the owning role) may
# analyse a table and clear its samples.
_TABLES = text(
    "SELECT t.tablename, pg_has_role(c.relowner, 'USAGE') FROM pg_tables t "
    "JOIN pg_namespace n ON n.nspname = t.schemaname "
    "JOIN pg_class c ON c.relnamespace = n.oid AND c.relname = t.tablename "
    "WHERE t.schemaname = current_schema() AND t.tablename > :after ORDER BY t.tablename"
)
# ANALYZE leaves a table's old samples where it finds no rows (one just emptied): PostgreSQL
# 18 can clear them first, in the same transaction (the table's owner may). On an older server
# such a table keeps them until it holds rows again (docs/operations.md).
_CAN_CLEAR = text(
    "SELECT to_regprocedure('pg_clear_attribute_stats(text,text,text,boolean)') IS NOT NULL"
)
_CLEAR = text(
    "SELECT count(pg_clear_attribute_stats(s.schemaname::text, s.tablename::text, "
    "s.attname::text, s.inherited)) FROM pg_stats s "
    "WHERE s.schemaname = current_schema() AND s.tablename IN ("
    "  SELECT CAST(:table AS name) UNION ALL SELECT c.relname FROM pg_index i "
    "  JOIN pg_class c ON c.oid = i.indexrelid "
    "  WHERE i.indrelid = CAST(quote_ident(:table) AS regclass))"
)


async def refresh_some(session: AsyncSession, *, after: str) -> str | None:
    """Analyse the tables after ``after`` afresh, as many as SLICE_S allows (at least one),
    in this transaction; the last one done, or None when none was left. A table the role does
    not own (one an operator added) is passed over with a warning."""
    tables = (await session.execute(_TABLES, {"after": after})).tuples().all()
    if not tables:
        return None
    clear = bool(await session.scalar(_CAN_CLEAR))
    until = time.monotonic() + SLICE_S
    done = after
    for table, owned in tables:
        if owned:
            if clear:
                await session.execute(_CLEAR, {"table": table})
            await session.execute(text(f'ANALYZE "{table}"'))
        else:
            log.warning("statistics not refreshed: not the table's owner", extra={"table": table})
        done = str(table)
        if time.monotonic() > until:
            break
    return done


async def refresh_all(sessions: SessionFactory) -> None:
    """Every table afresh, a slice per transaction."""
    after = ""
    while True:
        async with unit_of_work(sessions) as session:
            done = await refresh_some(session, after=after)
        if done is None:
            return
        after = done
