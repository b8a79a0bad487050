"""The webhook's group-commit writer into the inbox.

Concurrent webhook requests are grouped into one INSERT … ON CONFLICT DO NOTHING and one
commit, so many events share one WAL flush while each request still waits for its own
event to be durable before it is acknowledged. The new ones are handed on (``on_new``: the
inbox's ``enqueue_events``) after their commit."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import dataclass
from typing import Any

import asyncpg

log = logging.getLogger(__name__)

# One statement, so autocommit makes it one transaction: durable when it returns.
_INSERT = """
    INSERT INTO inbox (id, event_type, payload, author_id, channel_id, message_id)
    SELECT u.id, u.event_type, u.payload::jsonb, u.author_id, u.channel_id, u.message_id
    FROM unnest($1::text[], $2::text[], $3::text[], $4::bigint[], $5::bigint[], $6::bigint[])
        AS u(id, event_type, payload, author_id, channel_id, message_id)
    ON CONFLICT (id) DO NOTHING
    RETURNING id
"""


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
    # Who and what it is about, so an erasure finds the frame by identity.
    author_id: int | None = None
    channel_id: int | None = None
    message_id: int | None = None


class InboxWriter:
    """Group commit: one writer task drains whatever requests are waiting, per transaction."""

    def __init__(
        self,
        database_url: str,
        on_new: Callable[[list[str]], Coroutine[Any, Any, object]],
        *,
        max_batch: int = 500,
        transaction_pooling: bool = False,
    ) -> None:
        # The writer keeps one connection of its own: no pool checkout or pre-ping per batch.
        self._dsn = database_url.replace("postgresql+asyncpg://", "postgresql://", 1)
        # Behind PgBouncer (transaction mode) asyncpg must keep no prepared statements.
        self._statement_cache_size = 0 if transaction_pooling else 100
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
                self._conn = await asyncpg.connect(
                    self._dsn,
                    timeout=5,
                    command_timeout=10,
                    statement_cache_size=self._statement_cache_size,
                )
            rows = await self._conn.fetch(
                _INSERT,
                [e.id for e in events],
                [e.event_type for e in events],
                [e.payload for e in events],
                [e.author_id for e in events],
                [e.channel_id for e in events],
                [e.message_id for e in events],
            )
        except Exception as exc:
            if not _is_data_error(exc) and self._conn is not None:
                self._conn.terminate()  # a broken connection is replaced on the next batch
                self._conn = None
            raise
        return {row[0] for row in rows}
