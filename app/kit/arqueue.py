"""The JobQueue on ARQ/Redis. Connects lazily, fails fast: a down Redis never blocks intake."""

from __future__ import annotations

from collections.abc import Sequence

from arq.connections import ArqRedis
from arq.constants import default_queue_name, expires_extra_ms, job_key_prefix
from arq.jobs import serialize_job
from arq.utils import timestamp_ms
from redis.asyncio import ConnectionPool
from redis.exceptions import RedisError


class ArqQueue:
    def __init__(self, redis: ArqRedis) -> None:
        self.redis = redis

    async def enqueue(self, job: str, *args: object, job_id: str | None = None) -> bool:
        return await self.redis.enqueue_job(job, *args, _job_id=job_id) is not None

    async def enqueue_many(self, job: str, calls: Sequence[tuple[tuple[object, ...], str]]) -> None:
        """One pipelined round trip for a batch, in ARQ's own job format.

        ``SET NX`` + ``ZADD NX`` give the same guarantee as ``enqueue_job``'s WATCH: a job id
        that is already queued or running is not queued again."""
        now = timestamp_ms()
        async with self.redis.pipeline(transaction=False) as pipe:
            for args, job_id in calls:
                payload = serialize_job(job, args, {}, None, now)
                pipe.set(job_key_prefix + job_id, payload, px=expires_extra_ms, nx=True)
                pipe.zadd(default_queue_name, {job_id: now}, nx=True)
            await pipe.execute()

    async def ping(self) -> bool:
        try:
            return bool(await self.redis.ping())
        except (RedisError, OSError):
            return False

    async def close(self) -> None:
        await self.redis.aclose(close_connection_pool=True)


def create_queue(redis_url: str) -> ArqQueue:
    pool = ConnectionPool.from_url(
        redis_url, socket_connect_timeout=1.0, socket_timeout=2.0, max_connections=64
    )
    return ArqQueue(ArqRedis(connection_pool=pool))
