"""The erasure register: the one owner of `erasures`, and the rule every writer keeps about
an erased person — while their erasure runs (or failed and waits to be run again) nothing
is written about them, and once it is done nothing that started before it is.

A writer takes the person's guard lock, shared, in the transaction that writes, and asks
``blocked`` first; an erasure starts by taking the same lock exclusively. So a write either
commits before the erasure starts (and the erasure's batches, which all run later, remove
it) or sees the erasure and writes nothing."""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from datetime import date, datetime
from enum import StrEnum
from typing import Any

from sqlalchemy import func, select, text, update
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.ext.asyncio import AsyncSession

from app.kit.locks import lock_key, xact_lock
from app.models.erasure import Erasure

GUARD = "erasure-guard"
JOB_LOCK = "erasure-job"


class Status(StrEnum):
    # Also spelled in SQL: the table's check constraint and ``erasure_blocked`` (0023).
    RUNNING = "running"
    DONE = "done"
    FAILED = "failed"


class RequestedBy(StrEnum):
    FORGETME = "forgetme"
    ADMIN = "admin"


@dataclass(frozen=True, slots=True)
class ErasureRecord:
    id: int
    user_id: int
    status: Status
    requested_by: RequestedBy
    command_event_id: str | None
    channel_id: int | None
    progress: dict[str, Any]
    receipt: dict[str, int] | None
    error: str | None
    started_at: datetime
    finished_at: datetime | None


def _record(row: Erasure) -> ErasureRecord:
    return ErasureRecord(
        id=row.id,
        user_id=row.user_id,
        status=Status(row.status),
        requested_by=RequestedBy(row.requested_by),
        command_event_id=row.command_event_id,
        channel_id=row.channel_id,
        progress=dict(row.progress or {}),
        receipt=dict(row.receipt) if row.receipt is not None else None,
        error=row.error,
        started_at=row.started_at,
        finished_at=row.finished_at,
    )


# --- the guard --------------------------------------------------------------------------------

_HOLD = text("SELECT pg_advisory_xact_lock_shared(k) FROM unnest(CAST(:keys AS bigint[])) AS k")


async def hold(session: AsyncSession, user_ids: Collection[int]) -> None:
    """Hold these people's guard locks (shared) until the transaction ends: no erasure of
    theirs can start meanwhile. Taken first in a transaction, in one fixed order."""
    keys = sorted({lock_key(GUARD, user_id) for user_id in user_ids})
    if keys:
        await session.execute(_HOLD, {"keys": keys})


async def blocked(
    session: AsyncSession, user_ids: Collection[int], *, since: datetime | None
) -> set[int]:
    """Hold the guard, then: which of these people nothing may be written about by work
    that began at ``since`` (None: work beginning now) — an erasure of theirs is running or
    failed, or started after ``since``. The caller writes in this same transaction. One
    round trip: ``erasure_blocked`` (migration 0023) reads the register with a snapshot
    taken after the lock, so an erasure that committed while it waited is seen."""
    wanted = sorted(set(user_ids))
    if not wanted:
        return set()
    keys = sorted({lock_key(GUARD, user_id) for user_id in wanted})
    rows = await session.scalars(_BLOCKED, {"keys": keys, "people": wanted, "since": since})
    return set(rows)


_BLOCKED = text(
    "SELECT erasure_blocked(CAST(:keys AS bigint[]), CAST(:people AS bigint[]), "
    "CAST(:since AS timestamptz))"
)


# --- the register -----------------------------------------------------------------------------


async def start(
    session: AsyncSession,
    user_id: int,
    *,
    requested_by: RequestedBy,
    command_event_id: str | None = None,
    channel_id: int | None = None,
) -> tuple[ErasureRecord, bool]:
    """Register an erasure of ``user_id``, or join the one already running (or the one this
    command event started), or run a failed one again; ``(erasure, started)``. From the
    commit on, ``blocked`` holds for them: the exclusive guard waits for every write
    already under way."""
    await xact_lock(session, GUARD, user_id)
    if command_event_id is not None:
        earlier = await session.scalar(
            select(Erasure).where(Erasure.command_event_id == command_event_id)
        )
        if earlier is not None:
            return _record(earlier), False
    running = await session.scalar(
        select(Erasure).where(Erasure.user_id == user_id, Erasure.status == Status.RUNNING)
    )
    if running is not None:
        return _record(running), False
    failed = await resume_failed(session, user_id)
    if failed is not None:
        return failed, True
    row = await session.scalar(
        insert(Erasure)
        .values(
            user_id=user_id,
            requested_by=requested_by.value,
            command_event_id=command_event_id,
            channel_id=channel_id,
        )
        .returning(Erasure)
    )
    assert row is not None
    return _record(row), True


async def get(session: AsyncSession, erasure_id: int) -> ErasureRecord | None:
    row = await session.get(Erasure, erasure_id, populate_existing=True)
    return _record(row) if row is not None else None


async def save_progress(session: AsyncSession, erasure_id: int, progress: dict[str, Any]) -> None:
    """The job's place and counts, committed with the batch they describe."""
    await session.execute(
        update(Erasure).where(Erasure.id == erasure_id).values(progress=progress, error=None)
    )


async def finish(session: AsyncSession, erasure_id: int, receipt: dict[str, int]) -> None:
    """Done: the receipt (counts only) stays; the progress (which held names) goes."""
    await session.execute(
        update(Erasure)
        .where(Erasure.id == erasure_id)
        .values(status=Status.DONE, receipt=receipt, progress={}, finished_at=func.now())
    )


async def note_failure(session: AsyncSession, erasure_id: int, error: str, *, final: bool) -> None:
    """A job attempt failed (``error``: the exception's type name only); ``final``: give up
    until an operator starts it again (the person stays guarded meanwhile)."""
    values: dict[str, Any] = {"error": error[:200]}
    if final:
        values.update(status=Status.FAILED, finished_at=func.now())
    await session.execute(update(Erasure).where(Erasure.id == erasure_id).values(values))


async def resume_failed(session: AsyncSession, user_id: int) -> ErasureRecord | None:
    """A failed erasure of this person runs again (an operator's or the person's new
    request); None when there is none."""
    row = await session.scalar(
        update(Erasure)
        .where(Erasure.user_id == user_id, Erasure.status == Status.FAILED)
        .values(status=Status.RUNNING, finished_at=None, error=None)
        .returning(Erasure)
        .execution_options(populate_existing=True)
    )
    return _record(row) if row is not None else None


# --- what the budgets still count ---------------------------------------------------------
# An erasure takes the person's usage rows (to nobody) and step records (with their task
# grants) away; the register keeps the figures the daily token budget and the hourly task
# quota need, as numbers, on the person's newest erasure.

_NEWEST = "(SELECT max(id) FROM erasures WHERE user_id = :user_id)"

_KEEP_TOKENS = text(
    f"""
    UPDATE erasures SET kept = kept || jsonb_build_object(
        'day', CAST(:day AS text),
        'tokens', CASE WHEN kept ->> 'day' = CAST(:day AS text)
                       THEN coalesce((kept ->> 'tokens')::bigint, 0) ELSE 0 END + :tokens)
    WHERE id = {_NEWEST}
    """
)
_KEEP_GRANTS = text(
    f"""
    UPDATE erasures SET kept = kept || jsonb_build_object('task_grants',
        coalesce(kept -> 'task_grants', '[]'::jsonb) || to_jsonb(CAST(:grants AS text[])))
    WHERE id = {_NEWEST}
    """
)
_KEPT_TOKENS = text(
    "SELECT coalesce(sum((kept ->> 'tokens')::bigint), 0) FROM erasures "
    "WHERE user_id = :user_id AND kept ->> 'day' = CAST(:day AS text)"
)
_KEPT_GRANTS = text(
    "SELECT count(*) FROM erasures, jsonb_array_elements_text(kept -> 'task_grants') AS g "
    "WHERE user_id = :user_id AND CAST(g AS timestamptz) > :since"
)


async def keep_tokens(session: AsyncSession, user_id: int, day: date, tokens: int) -> None:
    """Add ``tokens`` to what the person spent on ``day`` (a JST day), as their erasure keeps
    it; an earlier day's figure is replaced."""
    if tokens > 0:
        await session.execute(
            _KEEP_TOKENS, {"user_id": user_id, "day": day.isoformat(), "tokens": tokens}
        )


async def keep_task_grants(
    session: AsyncSession, user_id: int, grants: Collection[datetime]
) -> None:
    """The times of the person's task grants still within the hour, as their erasure keeps
    them."""
    if grants:
        moments = sorted(moment.isoformat() for moment in grants)
        await session.execute(_KEEP_GRANTS, {"user_id": user_id, "grants": moments})


async def kept_tokens(session: AsyncSession, user_id: int, day: date) -> int:
    """The tokens the person's erasures keep for ``day``."""
    found = await session.scalar(_KEPT_TOKENS, {"user_id": user_id, "day": day.isoformat()})
    return int(found or 0)


async def kept_task_grants(session: AsyncSession, user_id: int, since: datetime) -> int:
    """How many of the task grants the person's erasures keep were made after ``since``."""
    found = await session.scalar(_KEPT_GRANTS, {"user_id": user_id, "since": since})
    return int(found or 0)


async def drop_spent(session: AsyncSession, *, today: date, hour_ago: datetime) -> int:
    """Forget the kept figures that no longer count: a day's tokens after that day, task
    grants older than the hour. How many erasures changed."""
    result = await session.execute(
        text(
            """
            UPDATE erasures SET kept = '{}'::jsonb
            WHERE kept <> '{}'::jsonb
              AND coalesce(kept ->> 'day', '') < CAST(:today AS text)
              AND NOT EXISTS (
                  SELECT 1 FROM jsonb_array_elements_text(
                      coalesce(kept -> 'task_grants', '[]'::jsonb)) AS g
                  WHERE CAST(g AS timestamptz) > :hour_ago)
            """
        ),
        {"today": today.isoformat(), "hour_ago": hour_ago},
    )
    return int(getattr(result, "rowcount", 0))


async def running_ids(session: AsyncSession) -> list[int]:
    """Erasures still running (the sweeper makes sure each has a job)."""
    rows = await session.scalars(select(Erasure.id).where(Erasure.status == Status.RUNNING))
    return list(rows)


async def revive_failed(session: AsyncSession, *, failed_before: datetime) -> list[int]:
    """Failed erasures whose last attempt ended before ``failed_before`` run again (the
    sweeper's retry: a failed erasure is never left unfinished); their ids."""
    rows = await session.scalars(
        update(Erasure)
        .where(Erasure.status == Status.FAILED, Erasure.finished_at < failed_before)
        .values(status=Status.RUNNING, finished_at=None)
        .returning(Erasure.id)
    )
    return list(rows)


async def claim_job(session: AsyncSession, erasure_id: int) -> bool:
    """Hold the erasure for one job until this transaction ends; False when another job
    already works on it."""
    found = await session.execute(
        text("SELECT pg_try_advisory_xact_lock(:k)"), {"k": lock_key(JOB_LOCK, erasure_id)}
    )
    return bool(found.scalar_one())
