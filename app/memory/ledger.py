"""The memory ledger: one `memory_log` row per read or change, and the change counter.

Every reader and writer of `memories` goes through here so the audit trail is complete."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from prometheus_client import Counter
from sqlalchemy import exists, select
from sqlalchemy.ext.asyncio import AsyncSession

from app.models.memory import Memory, MemoryLog

MEMORY_CHANGES = Counter(
    "memory_changes_total",
    "Memory rows added, updated, deleted or rolled back, by actor and action.",
    ["actor", "action"],
)

CHANGE_ACTIONS = ("add", "update", "delete", "rollback")


def snapshot(memory: Memory) -> dict[str, Any]:
    """The JSON state stored as a ledger row's before/after (enough to reinsert the row)."""
    return {
        "id": memory.id,
        "user_id": str(memory.user_id),
        "content": memory.content,
        "source": memory.source,
        "created_at": _iso(memory.created_at),
        "updated_at": _iso(memory.updated_at),
    }


def _iso(moment: datetime | None) -> str | None:
    return moment.isoformat() if moment is not None else None


async def log_read(
    session: AsyncSession,
    *,
    user_id: int,
    ids: Sequence[int],
    actor: str,
    reason: str = "",
    run_id: int | None = None,
    trigger: str | None = None,
) -> None:
    """One row per read, even an empty one: memory_id null, `after` the ids read."""
    session.add(
        MemoryLog(
            memory_id=None,
            user_id=user_id,
            actor=actor,
            action="read",
            reason=reason,
            before=None,
            after=list(ids),
            run_id=run_id,
            trigger=trigger,
        )
    )
    await session.flush()


async def log_change(
    session: AsyncSession,
    *,
    action: str,
    memory_id: int,
    user_id: int,
    actor: str,
    reason: str,
    before: dict[str, Any] | None,
    after: dict[str, Any] | None,
    run_id: int | None = None,
    trigger: str | None = None,
) -> None:
    """Record an add/update/delete/rollback. Call `count_changes` after the commit."""
    session.add(
        MemoryLog(
            memory_id=memory_id,
            user_id=user_id,
            actor=actor,
            action=action,
            reason=reason,
            before=before,
            after=after,
            run_id=run_id,
            trigger=trigger,
        )
    )
    await session.flush()


def count_changes(actor: str, action: str, n: int = 1) -> None:
    """Bump the metric once the change is committed (a rolled-back change never counts)."""
    if n > 0:
        MEMORY_CHANGES.labels(actor=actor, action=action).inc(n)


async def trigger_applied(session: AsyncSession, *, user_id: int, trigger: str) -> bool:
    """True when an earlier run of this trigger already changed this user's memories.

    Scoped by user so the lookup rides the `memory_log.user_id` index."""
    query = select(
        exists().where(
            MemoryLog.user_id == user_id,
            MemoryLog.trigger == trigger,
            MemoryLog.action.in_(CHANGE_ACTIONS),
        )
    )
    return bool((await session.execute(query)).scalar_one())
