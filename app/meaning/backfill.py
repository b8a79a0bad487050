"""The back-fill: every minute the worker gives the rows that wait a vector of the current
space (older rows, imports, rows written while the embeddings service was down, every row
after a change of model), memories first, in committed batches, so a run that stops (a
deploy, the service down) loses nothing and the next one goes on. What still waits is a
gauge per table. Then the memories' crowd figures that wait (app/memory/store/crowds.py)."""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

from prometheus_client import Counter, Gauge
from sqlalchemy.ext.asyncio import AsyncSession

from app.channel import store as channel_log
from app.db import unit_of_work
from app.embeddings.base import EmbeddingFailed
from app.kit.embedded import Waiting
from app.kit.vectors import Embedding
from app.memory import store as memories
from app.services import Services

log = logging.getLogger(__name__)

BATCH = 64  # rows per committed batch (one embeddings request)
BUDGET_S = 45.0  # a run ends in time for the next minute's

EMBEDDINGS_WAITING = Gauge(
    "embeddings_waiting", "Rows waiting for a vector of the current space, by table.", ["table"]
)
CROWDS_WAITING = Gauge(
    "memory_crowds_waiting",
    "Memories with a vector waiting for their crowd figure (app/memory/store/crowds.py).",
)
EMBEDDINGS_WRITTEN = Counter(
    "embeddings_backfilled_total", "Vectors the back-fill wrote, by table.", ["table"]
)


@dataclass(frozen=True, slots=True)
class Owner:
    """One table's owner, as the back-fill uses it."""

    table: str
    waiting: Callable[..., Awaitable[list[Waiting]]]
    store: Callable[[AsyncSession, Sequence[tuple[Waiting, Embedding]]], Awaitable[int]]
    count: Callable[[AsyncSession, str], Awaitable[int]]


OWNERS = (
    Owner(
        "memories",
        memories.waiting_embeddings,
        memories.store_embeddings,
        memories.embeddings_waiting,
    ),
    Owner(
        "messages",
        channel_log.waiting_embeddings,
        channel_log.store_embeddings,
        channel_log.embeddings_waiting,
    ),
)


async def backfill(
    services: Services, *, budget_s: float = BUDGET_S, batch: int = BATCH
) -> dict[str, int]:
    """Vectors for waiting rows until none waits or the budget is spent; how many per table.
    The embeddings service failing ends the run (the next minute tries again)."""
    embedder = services.embedder
    if embedder is None:
        return {}
    deadline = time.monotonic() + budget_s
    written = dict.fromkeys((owner.table for owner in OWNERS), 0)
    try:
        for owner in OWNERS:
            while time.monotonic() < deadline:
                done = await _batch(services, owner, embedder.space, batch)
                if done is None:
                    break
                written[owner.table] += done
    except EmbeddingFailed as exc:
        log.warning("back-fill paused: embeddings unavailable", extra={"failure": exc.failure})
    while time.monotonic() < deadline:
        # The memories' crowd figures: rows whose nearest changed, and any the vectors'
        # writers left without one (no embeddings call: done even with the service down).
        async with unit_of_work(services.sessions) as session:
            if not await memories.refresh_crowds(session, limit=batch):
                break
    await _measure(services, embedder.space)
    return written


async def _batch(services: Services, owner: Owner, space: str, batch: int) -> int | None:
    """One committed batch; None when nothing waits (or nothing could be written)."""
    assert services.embedder is not None
    async with services.sessions() as session:
        rows = await owner.waiting(session, space, limit=batch)
    if not rows:
        return None
    vectors = await services.embedder.documents([row.content for row in rows])
    async with unit_of_work(services.sessions) as session:
        done = await owner.store(session, list(zip(rows, vectors, strict=True)))
    EMBEDDINGS_WRITTEN.labels(table=owner.table).inc(done)
    # Every row changed since it was read: the next run reads them anew, never this one
    # again and again.
    return done or None


async def _measure(services: Services, space: str) -> None:
    async with services.sessions() as session:
        for owner in OWNERS:
            EMBEDDINGS_WAITING.labels(table=owner.table).set(await owner.count(session, space))
        CROWDS_WAITING.set(await memories.crowds_waiting(session))
