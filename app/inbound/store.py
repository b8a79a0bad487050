"""The durable inbox, the one owner of `inbox`: hand recorded events to the workers, claim
an event for its job, retry the failed with backoff, dead-letter the given up, replay them on
request, prune old handled rows. The webhook's group-commit writer is app/inbound/writer.py."""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Any

from prometheus_client import Counter, Gauge
from sqlalchemy import func, select, text, update
from sqlalchemy.ext.asyncio import AsyncSession

from app.db import SessionFactory, unit_of_work
from app.inbound.retries import LAST_ATTEMPT_LEASE, MAX_ATTEMPTS, RETRY_DELAYS, retry_delay
from app.kit.queue import JobQueue
from app.kit.sql import any_array
from app.models.inbox import InboxEvent
from app.turn import store as steps

log = logging.getLogger(__name__)

PROCESS_EVENT = "process_event"
DEDUPE_WINDOW = timedelta(days=7)


def event_job_id(event_id: str) -> str:
    return f"event:{event_id}"


async def enqueue_events(queue: JobQueue, event_ids: Sequence[str]) -> int:
    """Hand recorded events to the workers; a failure is only logged (the sweeper retries)."""
    try:
        await queue.enqueue_many(PROCESS_EVENT, [((eid,), event_job_id(eid)) for eid in event_ids])
    except Exception as exc:
        log.warning(
            "enqueue failed; the sweeper will retry",
            extra={"events": len(event_ids), "error": type(exc).__name__},
        )
        return 0
    return len(event_ids)


# --- the event job's claim, failure and finish ---------------------------------------------

DEAD_LETTERS = Counter(
    "inbox_dead_lettered_total", "Events given up after their retries (dead-lettered)"
)
DEAD_NOW = Gauge("inbox_dead_letters", "Dead-lettered events not replayed (at the last sweep)")
RETRIES = Counter("inbox_retries_total", "Failed event jobs scheduled to run again")

# A claimed attempt that never reports back (worker killed, job timeout) is due again after
# its pause, as if it had failed; the last attempt's claim waits LAST_ATTEMPT_LEASE.
_CLAIM = text(
    """
    UPDATE inbox
    SET attempts = attempts + 1,
        next_attempt_at = now() + make_interval(
            secs => coalesce((CAST(:delays AS float8[]))[attempts + 1], :last_lease))
    WHERE id = :id AND handled_at IS NULL AND dead_at IS NULL
    RETURNING attempts, payload, received_at
    """
)


@dataclass(frozen=True, slots=True)
class Claimed:
    """An event a job may work on now: its attempt number, the frame as recorded, and when
    it was recorded."""

    attempts: int
    payload: dict[str, Any]
    received_at: datetime

    @property
    def exhausted(self) -> bool:
        """Every attempt was used up by jobs that never reported back: give it up unrun."""
        return self.attempts > MAX_ATTEMPTS

    @property
    def last(self) -> bool:
        """No retry follows if this attempt fails."""
        return self.attempts >= MAX_ATTEMPTS


async def claim(session: AsyncSession, event_id: str) -> Claimed | None:
    """Count one more attempt at an unfinished event; None when it is unknown, done or dead."""
    params = {
        "id": event_id,
        "delays": [d.total_seconds() for d in RETRY_DELAYS],
        "last_lease": LAST_ATTEMPT_LEASE.total_seconds(),
    }
    row = (await session.execute(_CLAIM, params)).one_or_none()
    return Claimed(int(row[0]), dict(row[1]), row[2]) if row is not None else None


@dataclass(frozen=True, slots=True)
class Failure:
    """What became of a failed attempt: retried after ``retry_in``, or dead-lettered."""

    retry_in: timedelta | None

    @property
    def dead(self) -> bool:
        return self.retry_in is None


async def record_failure(session: AsyncSession, event_id: str, attempt: int, error: str) -> Failure:
    """Schedule the next attempt by the backoff, or dead-letter the event when its attempts
    are spent. ``error`` is the exception's type name only: never a message, never data."""
    delay = retry_delay(attempt)
    values: dict[str, Any] = {"last_error": error[:200]}
    if delay is None:
        # Dead, not handled: it stays (and is never pruned) until replayed.
        values.update(dead_at=func.now(), attempts=func.least(InboxEvent.attempts, MAX_ATTEMPTS))
    else:
        values.update(next_attempt_at=func.now() + delay)
    await session.execute(
        update(InboxEvent)
        .where(
            InboxEvent.id == event_id,
            InboxEvent.handled_at.is_(None),
            InboxEvent.dead_at.is_(None),
        )
        .values(**values)
    )
    return Failure(retry_in=delay)


async def mark_handled(session: AsyncSession, event_id: str) -> None:
    await session.execute(
        update(InboxEvent).where(InboxEvent.id == event_id).values(handled_at=func.now())
    )


async def close_unfinished_of(
    session: AsyncSession, user_id: int, *, before: datetime, keep: str | None
) -> int:
    """Mark the person's unfinished events recorded before ``before`` (waiting for a retry,
    or dead letters) handled without running them: after an erasure nothing of theirs may
    run or be replayed. The rows stay, so a redelivered frame is still a duplicate.
    ``keep``: the erasing event itself."""
    result = await session.execute(
        update(InboxEvent)
        .where(
            InboxEvent.author_id == user_id,
            InboxEvent.handled_at.is_(None),
            InboxEvent.received_at < before,
            InboxEvent.id != (keep or ""),
        )
        .values(handled_at=func.now(), dead_at=None, next_attempt_at=None)
        .returning(InboxEvent.id)
    )
    return len(result.all())


# --- dead letters -------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class DeadLetter:
    """A given-up event as operators see it: no payload, so no message text."""

    id: str
    event_type: str
    received_at: datetime
    dead_at: datetime
    attempts: int
    last_error: str | None


_DEAD = (InboxEvent.dead_at.is_not(None), InboxEvent.handled_at.is_(None))


async def dead_letters(session: AsyncSession, *, limit: int) -> tuple[list[DeadLetter], int]:
    """The newest ``limit`` dead letters, and how many there are in all."""
    rows = await session.execute(
        select(
            InboxEvent.id,
            InboxEvent.event_type,
            InboxEvent.received_at,
            InboxEvent.dead_at,
            InboxEvent.attempts,
            InboxEvent.last_error,
        )
        .where(*_DEAD)
        .order_by(InboxEvent.dead_at.desc(), InboxEvent.id)
        .limit(limit)
    )
    total = await session.scalar(select(func.count()).select_from(InboxEvent).where(*_DEAD))
    return [DeadLetter(*row) for row in rows], int(total or 0)


class Replay(StrEnum):
    REPLAYED = "replayed"
    UNKNOWN = "unknown"
    NOT_DEAD = "not-dead"


async def replay(session: AsyncSession, event_id: str) -> Replay:
    """Give a dead letter a fresh set of attempts, due now; the caller enqueues it after the
    commit (and the sweeper does, should that enqueue fail)."""
    revived = await session.scalar(
        update(InboxEvent)
        .where(InboxEvent.id == event_id, *_DEAD)
        .values(attempts=0, dead_at=None, next_attempt_at=func.now())
        .returning(InboxEvent.id)
    )
    if revived is not None:
        return Replay.REPLAYED
    known = await session.scalar(select(InboxEvent.id).where(InboxEvent.id == event_id))
    return Replay.NOT_DEAD if known is not None else Replay.UNKNOWN


# Never claimed: due once the webhook's own enqueue had its grace. Claimed: at its next attempt.
_DUE = text(
    """
    SELECT id FROM inbox
    WHERE handled_at IS NULL AND dead_at IS NULL
      AND coalesce(next_attempt_at, received_at + make_interval(secs => :grace)) <= now()
    ORDER BY coalesce(next_attempt_at, received_at)
    LIMIT :limit
    """
)
_COUNTS = text(
    """
    SELECT count(*) FILTER (
               WHERE dead_at IS NULL AND received_at < now() - make_interval(secs => :grace)),
           count(*) FILTER (WHERE dead_at IS NOT NULL)
    FROM inbox WHERE handled_at IS NULL
    """
)
_UNHANDLED = text("SELECT id FROM inbox WHERE handled_at IS NULL")
_PRUNE = text(
    """
    DELETE FROM inbox
    WHERE handled_at IS NOT NULL AND received_at < now() - make_interval(days => :days)
    """
)


async def enqueue_due(
    sessions: SessionFactory, queue: JobQueue, *, grace_s: float = 45.0, limit: int = 1000
) -> int:
    """Enqueue the events whose next attempt is due (never the dead, never one early); the
    job id keeps this idempotent while an attempt is still queued or running."""
    async with sessions() as session:
        result = await session.execute(_DUE, {"grace": grace_s, "limit": limit})
        due = [row[0] for row in result]
    if not due:
        return 0
    enqueued = await enqueue_events(queue, due)
    log.info("inbox due events enqueued", extra={"due": len(due), "enqueued": enqueued})
    return len(due)


async def sweep_inbox(
    sessions: SessionFactory, queue: JobQueue, *, grace_s: float = 45.0, limit: int = 1000
) -> int:
    """Enqueue what is due, refresh the dead-letter gauge; the backlog: unfinished events
    older than the grace that are not dead (waiting for a retry included)."""
    await enqueue_due(sessions, queue, grace_s=grace_s, limit=limit)
    async with sessions() as session:
        backlog, dead = (await session.execute(_COUNTS, {"grace": grace_s})).one()
    DEAD_NOW.set(int(dead))
    return int(backlog)


async def prune_inbox(sessions: SessionFactory) -> int:
    """The only retention job: forget handled events' de-duplication ids (and step records)
    older than seven days. Pending and dead events, and their step records, stay until they
    are handled: a replay must still find what its earlier attempts already did."""
    async with unit_of_work(sessions) as session:
        result = await session.execute(_PRUNE, {"days": DEDUPE_WINDOW.days})
        unfinished = [row[0] for row in await session.execute(_UNHANDLED)]
        await steps.prune(session, older_than_days=DEDUPE_WINDOW.days, keep=unfinished)
    return int(getattr(result, "rowcount", 0))


# --- erasure: frames found by who and what they are about -------------------------------------


async def frames_by_author(
    session: AsyncSession, user_id: int, *, after_id: str, limit: int
) -> list[str]:
    """The next ``limit`` ids of the person's own frames after ``after_id``."""
    rows = await session.scalars(
        select(InboxEvent.id)
        .where(InboxEvent.author_id == user_id, InboxEvent.id > after_id)
        .order_by(InboxEvent.id)
        .limit(limit)
    )
    return list(rows)


async def frames_about(
    session: AsyncSession, message_ids: Collection[int], *, channel_ids: Collection[int] = ()
) -> list[str]:
    """The frames about these messages, or in these channels."""
    if not message_ids and not channel_ids:
        return []
    rows = await session.scalars(
        select(InboxEvent.id).where(
            (InboxEvent.message_id == any_array(message_ids))
            | (InboxEvent.channel_id == any_array(channel_ids))
        )
    )
    return list(rows)


async def rewrite_frames(
    session: AsyncSession, event_ids: Collection[str], rewrite: Callable[[Any], Any]
) -> int:
    """Each of these recorded frames through ``rewrite``, written back when it changed; the
    rows stay, so a replayed event is still recognised as a duplicate."""
    if not event_ids:
        return 0
    rows = await session.execute(
        select(InboxEvent.id, InboxEvent.payload).where(InboxEvent.id.in_(list(event_ids)))
    )
    changed = 0
    for event_id, payload in rows.tuples():
        new = rewrite(payload)
        if new != payload:
            await session.execute(
                update(InboxEvent).where(InboxEvent.id == event_id).values(payload=new)
            )
            changed += 1
    return changed


async def usernames_in_frames(session: AsyncSession, user_id: int) -> set[str]:
    """The person's Discord usernames, as their recorded frames carry them."""
    rows = await session.scalars(
        text(
            "SELECT DISTINCT payload #>> '{d,author,username}' FROM inbox "
            "WHERE author_id = :uid AND payload #>> '{d,author,id}' = CAST(:uid AS text)"
        ),
        {"uid": user_id},
    )
    return {name for name in rows if name}
