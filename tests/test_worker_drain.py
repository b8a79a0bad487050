"""A draining worker (SIGTERM) claims nothing new, lets a job that ends within the grace
period finish, and hands one that does not back to the queue so another worker runs it at
once instead of after the claim's lapse (the longest job timeout + 10 s)."""

from __future__ import annotations

import asyncio
from typing import Any

from redis.asyncio import Redis

from app.config import Settings
from app.kit.arqueue import create_queue
from app.kit.arqworker import ResilientWorker
from tests.support.waiting import wait_until
from tests.support.worker import idle_worker

WITHIN_S = 10.0  # far below the claim's 110 s lapse and the idle workers' 600 s poll


async def test_a_job_that_ends_within_the_grace_finishes_and_nothing_new_is_claimed(
    settings: Settings, redis: Redis
) -> None:
    release = asyncio.Event()
    ran: list[str] = []

    async def job(ctx: dict[str, Any], name: str) -> None:
        ran.append(name)
        if name == "first":
            await release.wait()

    queue = create_queue(settings.redis_url)
    try:
        async with idle_worker(settings, redis, job) as worker:
            worker.drain_grace_s = WITHIN_S
            await queue.enqueue("job", "first", job_id="job:first")
            await wait_until(lambda: ran == ["first"], within=WITHIN_S, what="the first job")
            worker.drain()
            await queue.enqueue("job", "second", job_id="job:second")
            release.set()
            await wait_until(lambda: stopped(worker), within=WITHIN_S, what="the drain")
    finally:
        await queue.close()
    assert ran == ["first"]
    assert worker.jobs_complete == 1 and worker.released == []
    assert await redis.zscore("arq:queue", "job:second") is not None  # left for the others
    assert not await redis.exists("arq:in-progress:job:second")


async def test_a_job_past_the_grace_is_handed_back_and_another_worker_takes_it_at_once(
    settings: Settings, redis: Redis
) -> None:
    ran: list[str] = []

    async def stuck(ctx: dict[str, Any], name: str) -> None:
        ran.append(f"draining worker: {name}")
        await asyncio.Event().wait()  # never ends on its own

    async def quick(ctx: dict[str, Any], name: str) -> None:
        ran.append(f"other worker: {name}")

    queue = create_queue(settings.redis_url)
    try:
        async with idle_worker(settings, redis, stuck) as draining:
            draining.drain_grace_s = 0.2
            await queue.enqueue("job", "turn", job_id="job:turn")
            await wait_until(lambda: len(ran) == 1, within=WITHIN_S, what="the job to start")
            async with idle_worker(settings, redis, quick) as other:
                draining.drain()
                await wait_until(lambda: len(ran) == 2, within=WITHIN_S, what="the other worker")
                await wait_until(lambda: stopped(draining), within=WITHIN_S, what="drain")
                # ARQ counts a job complete after its function returns (the result, the queue
                # entry): waited for, not assumed, on a loaded machine.
                await wait_until(
                    lambda: other.jobs_complete == 1, within=WITHIN_S, what="the other's count"
                )
    finally:
        await queue.close()
    assert ran == ["draining worker: turn", "other worker: turn"]
    assert draining.released == ["job:turn"] and draining.jobs_complete == 0
    assert await redis.zcard("arq:queue") == 0  # run once to the end, by the other


def stopped(worker: ResilientWorker) -> bool:
    return worker.main_task is not None and worker.main_task.done()
