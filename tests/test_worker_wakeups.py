"""An enqueue wakes an idle worker at once: a job starts long before the worker's fallback
poll would have found it, whether it came from the API's batch enqueue, a single enqueue, or
a slot freed by a finished job; a burst worker reads the queue again when its job ends, not
while it runs."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
from redis.asyncio import Redis

from app.config import Settings
from app.kit.arqueue import ArqQueue, create_queue, wake_channel
from app.kit.arqworker import BURST_POLL_S
from tests.support.waiting import wait_until
from tests.support.worker import idle_worker, job_worker

STARTED_WITHIN_S = 20.0  # far below the idle worker's fallback poll


@asynccontextmanager
async def api_queue(settings: Settings) -> AsyncIterator[ArqQueue]:
    queue = create_queue(settings.redis_url)
    try:
        yield queue
    finally:
        await queue.close()


@pytest.mark.parametrize("how", ["enqueue_many", "enqueue"])
async def test_an_enqueued_job_starts_without_waiting_for_the_poll(
    settings: Settings, redis: Redis, how: str
) -> None:
    started = asyncio.Event()

    async def job(ctx: dict[str, Any], n: int) -> None:
        started.set()

    async with idle_worker(settings, redis, job), api_queue(settings) as queue:
        if how == "enqueue_many":
            await queue.enqueue_many("job", [((1,), "job:1")])
        else:
            await queue.enqueue("job", 1, job_id="job:1")
        async with asyncio.timeout(STARTED_WITHIN_S):
            await started.wait()


async def test_a_worker_at_capacity_starts_the_next_job_when_one_finishes(
    settings: Settings, redis: Redis
) -> None:
    release = asyncio.Event()
    ran: list[int] = []

    async def job(ctx: dict[str, Any], n: int) -> None:
        ran.append(n)
        if n == 1:
            await release.wait()

    async with idle_worker(settings, redis, job, max_jobs=1), api_queue(settings) as queue:
        await queue.enqueue_many("job", [((1,), "job:1"), ((2,), "job:2")])
        await wait_until(lambda: ran == [1], within=STARTED_WITHIN_S, what="the first job")
        release.set()
        await wait_until(lambda: ran == [1, 2], within=STARTED_WITHIN_S, what="the second job")


def test_each_redis_database_has_its_own_wake_channel() -> None:
    four, five = Redis.from_url("redis://127.0.0.1:6379/4"), Redis.from_url("redis://h/5")
    assert wake_channel(four) == "arq:queue:wake:4"
    assert wake_channel(four) != wake_channel(five)


async def test_a_burst_worker_reads_the_queue_again_when_its_job_ends_not_while_it_runs(
    settings: Settings, redis: Redis
) -> None:
    """A burst worker (the tests' drain, a one-off run) used to read the queue without pause
    while its job ran: thousands of reads a second. It now waits for the job to end, with a
    read every BURST_POLL_S for a job someone else queued."""
    ran: list[int] = []
    job_s = 0.5  # how long the job runs: the span whose reads are counted

    async def job(ctx: dict[str, Any], n: int) -> None:
        await asyncio.sleep(job_s)
        ran.append(n)

    worker = job_worker(settings, job, burst=True, poll_delay=0)
    reads = 0
    poll = worker._poll_iteration

    async def counted() -> None:
        nonlocal reads
        reads += 1
        await poll()

    worker._poll_iteration = counted  # type: ignore[method-assign]
    async with api_queue(settings) as queue:
        await queue.enqueue("job", 1, job_id="job:1")
        try:
            await worker.main()
        finally:
            await worker.close()
    assert ran == [1]
    assert reads <= job_s / BURST_POLL_S + 3  # about one a BURST_POLL_S, not thousands
