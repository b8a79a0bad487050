"""The worker every entry point runs is our ResilientWorker, built directly, and its backoff
stays within its bounds."""

from __future__ import annotations

from typing import Any

from redis.asyncio import Redis

from app.config import Settings
from app.db import SessionFactory
from app.kit.arqueue import create_queue
from app.kit.arqworker import Backoff, ResilientWorker
from app.worker import build_worker
from tests.support.waiting import wait_until
from tests.support.worker import drain, idle_worker


async def test_every_entry_point_builds_the_resilient_worker_with_the_bots_jobs(
    settings: Settings,
) -> None:
    # `python -m app worker`, the dev stack, the tests and the benchmarks all call this.
    worker = build_worker(settings)
    assert type(worker) is ResilientWorker
    jobs = {"process_event", "remember_after_reply", "nightly_step", "consolidate_channel"}
    assert jobs <= set(worker.functions)
    assert worker.max_jobs == settings.worker_max_jobs
    assert worker.drain_grace_s == settings.worker_drain_grace_s
    await worker.pool.aclose()


async def test_the_test_drain_worker_is_resilient_too(
    settings: Settings, sessions: SessionFactory, redis: Redis
) -> None:
    assert isinstance(await drain(settings), ResilientWorker)


def test_backoff_doubles_up_to_its_cap_and_starts_over_after_a_success() -> None:
    backoff = Backoff(first=0.1, cap=2.0)
    delays = [backoff.next() for _ in range(8)]
    assert 0.05 <= delays[0] <= 0.1
    assert 0.1 <= delays[1] <= 0.2
    assert all(1.0 <= d <= 2.0 for d in delays[5:])
    backoff.reset()
    assert backoff.next() <= 0.1


async def test_a_job_another_worker_has_in_progress_is_left_to_it(
    settings: Settings, redis: Redis
) -> None:
    ran: list[str] = []

    async def job(ctx: dict[str, Any], name: str) -> None:
        ran.append(name)

    queue = create_queue(settings.redis_url)
    try:
        await queue.enqueue_many("job", [(("theirs",), "job:theirs")])
        await redis.set("arq:in-progress:job:theirs", b"1")  # what another worker's claim left
        async with idle_worker(settings, redis, job):
            await queue.enqueue_many("job", [(("ours",), "job:ours")])
            await wait_until(lambda: "ours" in ran, within=20, what="our job")
    finally:
        await queue.close()
    assert ran == ["ours"]
    assert await redis.zscore("arq:queue", "job:theirs") is not None  # still queued, theirs
