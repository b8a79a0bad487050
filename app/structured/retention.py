"""MEM-06 hard retention: memories not updated within ``MEMORY_RETENTION_DAYS`` are purged.

Run by the nightly run; each purge is a logged delete (actor `retention`, before state and
run id) so the run's rollback can reinsert it like any other delete."""

from __future__ import annotations

from datetime import datetime, timedelta

from sqlalchemy.ext.asyncio import AsyncSession

from app.memory import store
from app.memory.records import Why
from app.vocabulary import Actor

ACTOR = Actor.RETENTION
REASON = "retention"
# Deletes are cheap, but a night's ledger and summary stay readable; the rest go tomorrow.
RETENTION_CAP = 1000


def retention_cutoff(now: datetime, retention_days: int) -> datetime:
    """Memories last updated before this moment are past retention."""
    return now - timedelta(days=retention_days)


async def purge_expired(
    session: AsyncSession,
    *,
    retention_days: int,
    run_id: int | None,
    now: datetime,
    limit: int = RETENTION_CAP,
) -> list[int]:
    """Delete memories not updated within ``retention_days`` (oldest first, at most
    ``limit``), each logged; the ids deleted, ascending. The caller commits."""
    trigger = f"retention:{run_id}" if run_id is not None else None
    why = Why(ACTOR, REASON, run_id=run_id, trigger=trigger)
    cutoff = retention_cutoff(now, retention_days)
    return await store.purge_expired(session, cutoff=cutoff, why=why, limit=limit)
