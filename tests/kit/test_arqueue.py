"""The batch enqueue writes ARQ's own job format (as JSON) and never replaces a queued job;
the installed ARQ's real worker runs what it wrote."""

from __future__ import annotations

import json
from typing import Any

from arq import func
from arq.connections import RedisSettings
from arq.jobs import deserialize_job, serialize_job
from arq.utils import timestamp_ms
from arq.worker import Worker
from redis.asyncio import Redis

from app.config import Settings
from app.kit.arqueue import create_queue, dump_job, load_job

SNOWFLAKE = 1_234_567_890_123_456_789  # ids are 64-bit: they must survive the round trip


async def run_burst(settings: Settings, record: Any) -> Worker:
    """The installed ARQ's worker, in our format, running ``record`` as job "record"."""
    worker = Worker(
        functions=[func(record, name="record")],
        redis_settings=RedisSettings.from_dsn(settings.redis_url),
        burst=True,
        poll_delay=0,
        handle_signals=False,
        job_serializer=dump_job,
        job_deserializer=load_job,
    )
    try:
        await worker.main()
    finally:
        await worker.close()
    return worker


async def test_enqueue_many_queues_each_id_once_in_arq_format(
    settings: Settings, redis: Redis
) -> None:
    queue = create_queue(settings.redis_url)
    try:
        await queue.enqueue_many("process_event", [(("a",), "event:a"), (("b",), "event:b")])
        await queue.enqueue_many("process_event", [(("changed",), "event:a")])
        assert await queue.enqueue("process_event", "again", job_id="event:b") is False
    finally:
        await queue.close()
    assert sorted(await redis.zrange("arq:queue", 0, -1)) == [b"event:a", b"event:b"]
    job = deserialize_job(await redis.get("arq:job:event:a"), deserializer=load_job)
    assert (job.function, list(job.args)) == ("process_event", ["a"])


async def test_enqueue_many_jobs_are_json_and_run_once_by_the_real_arq_worker(
    settings: Settings, redis: Redis
) -> None:
    ran: list[tuple[Any, ...]] = []

    async def record(ctx: dict[str, Any], *args: Any) -> None:
        ran.append(args)

    queue = create_queue(settings.redis_url)
    try:
        await queue.enqueue_many("record", [((SNOWFLAKE, "first"), "job:1"), ((2, "b"), "job:2")])
        await queue.enqueue_many("record", [((3, "duplicate"), "job:1")])
    finally:
        await queue.close()

    raw = await redis.get("arq:job:job:1")
    assert not raw.startswith(b"\x80")  # not a pickle (protocol 2+ starts with PROTO)
    assert json.loads(raw)["a"] == [SNOWFLAKE, "first"]

    worker = await run_burst(settings, record)

    assert sorted(ran) == [(2, "b"), (SNOWFLAKE, "first")]
    assert (worker.jobs_complete, worker.jobs_failed) == (2, 0)


async def test_a_pickled_job_left_in_redis_is_dropped_as_failed_not_run(
    settings: Settings, redis: Redis
) -> None:
    """An upgrade may find jobs queued by the pickle-era code: the worker must not unpickle
    them; it fails them, and the sweepers re-enqueue their work from Postgres."""
    ran: list[tuple[Any, ...]] = []

    async def record(ctx: dict[str, Any], *args: Any) -> None:
        ran.append(args)

    await redis.set("arq:job:old", serialize_job("record", (1,), {}, None, timestamp_ms()))
    await redis.zadd("arq:queue", {"old": timestamp_ms()})
    worker = await run_burst(settings, record)

    assert ran == [] and worker.jobs_failed == 1
    assert await redis.zcard("arq:queue") == 0 and not await redis.exists("arq:job:old")
