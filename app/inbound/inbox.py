"""The durable inbox: record events with group commit, re-enqueue the unfinished, prune old.

Concurrent webhook requests are grouped into one INSERT … ON CONFLICT DO NOTHING and one
commit, so many events share one WAL flush while each request still waits for its own
event to be durable before it is acknowledged."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import asyncpg
from sqlalchemy import func, text, update
from sqlalchemy.ext.asyncio import AsyncSession

from app.db import SessionFactory, unit_of_work
from app.inbound import steps
from app.kit.queue import JobQueue
from app.kit.sql import rewrite_matching
from app.models.inbox import InboxEvent

log = logging.getLogger(__name__)

PROCESS_EVENT = "process_event"
DEDUPE_WINDOW = timedelta(days=7)

# One statement, so autocommit makes it one transaction: durable when it returns.
_INSERT = """
    INSERT INTO inbox (id, event_type, payload)
    SELECT u.id, u.event_type, u.payload::jsonb
    FROM unnest($1::text[], $2::text[], $3::text[]) AS u(id, event_type, payload)
    ON CONFLICT (id) DO NOTHING
    RETURNING id
"""


def event_job_id(event_id: str) -> str:
    return f"event:{event_id}"


class InboxUnavailable(Exception):
    """The event could not be recorded durably (Postgres unreachable or failing)."""


class InboxRejected(ValueError):
    """Postgres refused the event's data itself (e.g. a NUL character in a JSON string)."""


def _is_data_error(exc: BaseException) -> bool:
    # SQLSTATE class 22 is "data exception": the row, not the database, is at fault.
    return isinstance(exc, asyncpg.PostgresError) and str(exc.sqlstate or "").startswith("22")


@dataclass(frozen=True, slots=True)
class Incoming:
    id: str
    event_type: str
    payload: str  # the raw JSON frame, stored as received


class InboxWriter:
    """Group commit: one writer task drains whatever requests are waiting, per transaction."""

    def __init__(
        self,
        database_url: str,
        on_new: Callable[[list[str]], Coroutine[Any, Any, object]],
        *,
        max_batch: int = 500,
    ) -> None:
        # The writer keeps one connection of its own: no pool checkout or pre-ping per batch.
        self._dsn = database_url.replace("postgresql+asyncpg://", "postgresql://", 1)
        self._conn: asyncpg.Connection | None = None
        self._on_new = on_new
        self._max_batch = max_batch
        self._waiting: asyncio.Queue[tuple[Incoming, asyncio.Future[bool]]] = asyncio.Queue()
        self._task: asyncio.Task[None] | None = None
        self._followups: set[asyncio.Task[object]] = set()

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name="inbox-writer")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        await asyncio.gather(*self._followups, return_exceptions=True)
        if self._conn is not None:
            await self._conn.close()

    async def record(self, event: Incoming) -> bool:
        """Wait until ``event`` is committed; True if new, False if already recorded."""
        future: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        await self._waiting.put((event, future))
        return await future

    async def _run(self) -> None:
        while True:
            batch = [await self._waiting.get()]
            while len(batch) < self._max_batch and not self._waiting.empty():
                batch.append(self._waiting.get_nowait())
            await self._commit(batch)

    async def _commit(self, batch: list[tuple[Incoming, asyncio.Future[bool]]]) -> None:
        events = [event for event, _ in batch]
        try:
            inserted = await self._insert(events)
        except Exception as exc:
            if _is_data_error(exc) and len(batch) > 1:
                # One malformed row must not fail its neighbours: retry them one by one.
                for item in batch:
                    await self._commit([item])
                return
            log.warning("inbox insert failed", extra={"error": type(exc).__name__})
            failure = InboxRejected() if _is_data_error(exc) else InboxUnavailable()
            for _, future in batch:
                if not future.done():
                    future.set_exception(failure)
            return
        fresh = [event.id for event in events if event.id in inserted]
        for event, future in batch:
            # Within one batch a repeated id is new for its first request only.
            is_new = event.id in inserted
            inserted.discard(event.id)
            if not future.done():
                future.set_result(is_new)
        if fresh:
            task = asyncio.create_task(self._on_new(fresh))
            self._followups.add(task)
            task.add_done_callback(self._followups.discard)

    async def _insert(self, events: Sequence[Incoming]) -> set[str]:
        try:
            if self._conn is None or self._conn.is_closed():
                self._conn = await asyncpg.connect(self._dsn, timeout=5, command_timeout=10)
            rows = await self._conn.fetch(
                _INSERT,
                [e.id for e in events],
                [e.event_type for e in events],
                [e.payload for e in events],
            )
        except Exception as exc:
            if not _is_data_error(exc) and self._conn is not None:
                self._conn.terminate()  # a broken connection is replaced on the next batch
                self._conn = None
            raise
        return {row[0] for row in rows}


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


# --- the event job's claim and finish -------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Claimed:
    """An event a job may work on now: its attempt number and the frame as recorded."""

    attempts: int
    payload: dict[str, Any]


async def claim(session: AsyncSession, event_id: str) -> Claimed | None:
    """Count one more attempt at an unfinished event; None when it is unknown or done."""
    row = (
        await session.execute(
            update(InboxEvent)
            .where(InboxEvent.id == event_id, InboxEvent.handled_at.is_(None))
            .values(attempts=InboxEvent.attempts + 1)
            .returning(InboxEvent.attempts, InboxEvent.payload)
        )
    ).one_or_none()
    return Claimed(int(row[0]), dict(row[1])) if row is not None else None


async def mark_handled(session: AsyncSession, event_id: str) -> None:
    await session.execute(
        update(InboxEvent).where(InboxEvent.id == event_id).values(handled_at=func.now())
    )


_PENDING = text(
    """
    SELECT id FROM inbox
    WHERE handled_at IS NULL AND received_at < now() - make_interval(secs => :grace)
    ORDER BY received_at
    LIMIT :limit
    """
)
_PRUNE = text("DELETE FROM inbox WHERE received_at < now() - make_interval(days => :days)")


async def sweep_inbox(
    sessions: SessionFactory, queue: JobQueue, *, grace_s: float = 45.0, limit: int = 1000
) -> int:
    """Re-enqueue recorded events no job has finished; the job id keeps this idempotent."""
    async with sessions() as session:
        result = await session.execute(_PENDING, {"grace": grace_s, "limit": limit})
        pending = [row[0] for row in result]
    if not pending:
        return 0
    enqueued = await enqueue_events(queue, pending)
    log.info("inbox swept", extra={"pending": len(pending), "enqueued": enqueued})
    return len(pending)


async def prune_inbox(sessions: SessionFactory) -> int:
    """The only retention job: forget de-duplication ids (and the per-event step records
    that go with them) older than seven days."""
    async with unit_of_work(sessions) as session:
        result = await session.execute(_PRUNE, {"days": DEDUPE_WINDOW.days})
        await steps.prune(session, older_than_days=DEDUPE_WINDOW.days)
    return int(getattr(result, "rowcount", 0))


async def scrub_events(
    session: AsyncSession, patterns: Sequence[str], rewrite: Callable[[Any], Any]
) -> int:
    """Rewrite recorded frames that hold a person (theirs, quotes of theirs, mentions of
    them); the rows stay, so a replayed event is still recognised as a duplicate."""
    return await rewrite_matching(
        session,
        table="inbox",
        key="id",
        column="payload",
        patterns=patterns,
        rewrite=rewrite,
        json=True,
    )
