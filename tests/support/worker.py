"""Run the real worker (``app.worker.build_worker``, what ``python -m app worker`` runs) in
burst mode until the queue is empty, or ours long-running and idle."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from arq import func
from arq.connections import RedisSettings
from arq.typing import WorkerCoroutine
from redis.asyncio import Redis

from app.config import Settings
from app.kit.arqueue import dump_job, load_job
from app.kit.arqworker import ResilientWorker
from app.worker import build_worker
from tests.support.waiting import wait_until

IDLE_POLL_S = 600.0  # far beyond any test's timeout: only a wake-up starts a job


def make_worker(settings: Settings) -> ResilientWorker:
    """The real worker, in burst mode and without its cron jobs (tests run those directly)."""
    return build_worker(settings, burst=True, poll_delay=0, cron_jobs=[])


async def drain(settings: Settings) -> ResilientWorker:
    """Process every queued job, then stop; returns the worker for its counters."""
    worker = make_worker(settings)
    try:
        await worker.main()
    finally:
        await worker.close()
    return worker


@asynccontextmanager
async def started_worker(settings: Settings) -> AsyncIterator[dict[str, Any]]:
    """The real worker running (no cron jobs), once it has started its services: its ``ctx``,
    to call a cron job's function with as the worker's cron would."""
    worker = build_worker(settings, cron_jobs=[])
    working = asyncio.create_task(worker.async_run())
    try:
        await wait_until(lambda: "services" in worker.ctx, within=20, what="the worker")
        yield worker.ctx
    finally:
        worker.drain()
        await asyncio.gather(working, return_exceptions=True)
        await worker.close()


def job_worker(settings: Settings, job: WorkerCoroutine, **options: Any) -> ResilientWorker:
    """Our worker class running only ``job`` (as "job"), in our job format; ``options`` are
    ARQ's (``burst``, ``poll_delay``, ``max_jobs``…)."""
    return ResilientWorker(
        functions=[func(job, name="job")],
        redis_settings=RedisSettings.from_dsn(settings.redis_url),
        handle_signals=False,
        job_serializer=dump_job,
        job_deserializer=load_job,
        **options,
    )


@asynccontextmanager
async def idle_worker(
    settings: Settings, redis: Redis, job: WorkerCoroutine, *, max_jobs: int = 10
) -> AsyncIterator[ResilientWorker]:
    """A long-running worker that has polled once and is now idle."""
    worker = job_worker(settings, job, poll_delay=IDLE_POLL_S, max_jobs=max_jobs)
    running = asyncio.create_task(worker.async_run())
    try:
        # ARQ writes its health-check key after its first poll.
        await wait_until(
            lambda: redis.exists("arq:queue:health-check"), within=10, what="the first poll"
        )
        yield worker
    finally:
        # A job that just ran may still be reporting its result to Redis: let it end, so
        # closing the worker never cancels it mid-report.
        ongoing = [task for task in worker.tasks.values() if not task.done()]
        if ongoing:
            await asyncio.wait(ongoing, timeout=10)
        running.cancel()
        await asyncio.gather(running, return_exceptions=True)
        await worker.close()
