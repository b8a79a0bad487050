"""The JobQueue on ARQ/Redis. Connects lazily, fails fast: a down Redis never blocks intake."""

from __future__ import annotations

from arq.connections import ArqRedis
from redis.asyncio import ConnectionPool
from redis.exceptions import RedisError


class ArqQueue:
    def __init__(self, redis: ArqRedis) -> None:
        self.redis = redis

    async def enqueue(self, job: str, *args: object, job_id: str | None = None) -> bool:
        return await self.redis.enqueue_job(job, *args, _job_id=job_id) is not None

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
