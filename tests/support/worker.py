"""Run the real ARQ worker (our WorkerSettings) in burst mode until the queue is empty."""

from __future__ import annotations

from arq.connections import RedisSettings
from arq.worker import Worker

from app.config import Settings
from app.worker import WorkerSettings, shutdown, startup


def make_worker(settings: Settings) -> Worker:
    return Worker(
        functions=WorkerSettings.functions,
        redis_settings=RedisSettings.from_dsn(settings.redis_url),
        on_startup=startup,
        on_shutdown=shutdown,
        ctx={"settings": settings},
        burst=True,
        poll_delay=0,
        handle_signals=False,
        job_timeout=WorkerSettings.job_timeout,
        job_serializer=WorkerSettings.job_serializer,
        job_deserializer=WorkerSettings.job_deserializer,
    )


async def drain(settings: Settings) -> Worker:
    """Process every queued job, then stop; returns the worker for its counters."""
    worker = make_worker(settings)
    try:
        await worker.main()
    finally:
        await worker.close()
    return worker
