"""MEM-06 hard retention: memories not updated within ``MEMORY_RETENTION_DAYS`` are purged.

Run by the nightly run; each purge is a logged delete (actor `retention`, before state and
run id) so the run's rollback can reinsert it like any other delete."""

from __future__ import annotations

from datetime import datetime, timedelta

from sqlalchemy import delete, select
from sqlalchemy.ext.asyncio import AsyncSession

from app.memory import ledger, repository
from app.models.memory import Memory

ACTOR = "retention"
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
    """Delete memories not updated within ``retention_days`` (oldest first, at most ``limit``)
    and log each; the ids deleted, ascending. The caller commits, then calls
    ``ledger.count_changes(ACTOR, "delete", len(ids))``."""
    cutoff = retention_cutoff(now, retention_days)
    candidates = (
        await session.execute(
            select(Memory.id, Memory.user_id)
            .where(Memory.updated_at < cutoff)
            .order_by(Memory.updated_at, Memory.id)
            .limit(limit)
        )
    ).all()
    if not candidates:
        return []
    # The write path's per-user lock, taken in a fixed order (no deadlock with a rollback).
    for user_id in sorted({user_id for _, user_id in candidates}):
        await repository.lock_user(session, user_id)
    # Re-checked under the locks: a memory refreshed meanwhile is no longer expired.
    gone = (
        await session.scalars(
            delete(Memory)
            .where(Memory.id.in_([memory_id for memory_id, _ in candidates]))
            .where(Memory.updated_at < cutoff)
            .returning(Memory)
            .execution_options(populate_existing=True)
        )
    ).all()
    for memory in sorted(gone, key=lambda m: m.id):
        await ledger.log_change(
            session,
            action="delete",
            memory_id=memory.id,
            user_id=memory.user_id,
            actor=ACTOR,
            reason=REASON,
            before=ledger.snapshot(memory),
            after=None,
            run_id=run_id,
            trigger=f"retention:{run_id}" if run_id is not None else None,
        )
    return sorted(m.id for m in gone)
