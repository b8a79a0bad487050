"""The figures to scale on: the worker exports the jobs due now (waiting or running, deferred
ones left out), the age of the oldest due job no worker has started, and its own running jobs
and slots; the metrics port answers the liveness probe beside them."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

import httpx
from prometheus_client import REGISTRY
from redis.asyncio import Redis

from app.config import Settings
from app.kit.arqueue import create_queue
from app.kit.probes import start_probe_server
from tests.support.servers import free_port
from tests.support.waiting import wait_until
from tests.support.worker import idle_worker


def metric(name: str) -> float:
    value = REGISTRY.get_sample_value(name)
    assert value is not None, name
    return value


async def test_due_jobs_count_waiting_and_running_but_not_deferred_ones(
    settings: Settings, redis: Redis
) -> None:
    release = asyncio.Event()
    started: list[str] = []

    async def job(ctx: dict[str, Any], name: str) -> None:
        started.append(name)
        await release.wait()

    queue = create_queue(settings.redis_url)
    try:
        async with idle_worker(settings, redis, job, max_jobs=1) as worker:
            worker.queue_sample_s = 0.0  # sample on every turn of the loop
            await queue.enqueue_many("job", [(("a",), "job:a"), (("b",), "job:b")])
            await queue.enqueue("job", "c", job_id="job:c")
            await queue.redis.enqueue_job("job", "later", _defer_by=timedelta(hours=1))
            await wait_until(lambda: started == ["a"], within=10, what="the first job")

            def sampled() -> bool:
                return metric("queue_jobs_due") == 3 and metric("worker_jobs_running") == 1

            await wait_until(sampled, within=10, what="the figures")
            await wait_until(
                lambda: metric("queue_oldest_due_seconds") > 0, within=10, what="b's age"
            )
            assert metric("worker_job_slots") == 1
            release.set()
            await wait_until(lambda: len(started) == 3, within=10, what="every due job")
            await wait_until(lambda: metric("queue_jobs_due") == 0, within=10, what="none due")
            assert metric("queue_oldest_due_seconds") == 0
    finally:
        release.set()
        await queue.close()


async def test_the_metrics_port_answers_the_liveness_probe_with_the_loops_health() -> None:
    alive = True
    port = free_port()
    start_probe_server(port, lambda: alive, host="127.0.0.1")
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}") as client:
        healthy = await client.get("/healthz")
        alive = False
        stuck = await client.get("/healthz")
        metrics = await client.get("/metrics")
    assert healthy.status_code == 200 and stuck.status_code == 503
    assert metrics.status_code == 200 and "queue_jobs_due" in metrics.text
