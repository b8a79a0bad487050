"""The batch enqueue writes ARQ's own job format and never replaces a queued job."""

from __future__ import annotations

from arq.jobs import deserialize_job
from redis.asyncio import Redis

from app.config import Settings
from app.kit.arqueue import create_queue


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
    job = deserialize_job(await redis.get("arq:job:event:a"))
    assert (job.function, job.args) == ("process_event", ("a",))
