"""The JobQueue on ARQ/Redis. Connects lazily, fails fast: a down Redis never blocks intake.

Every enqueue also publishes a wake-up on the queue's channel, so an idle worker starts the
job at once instead of at its next poll (the poll stays, slower, for a wake-up that is lost).
``redis_client`` builds the connection the API and the worker share the rules of: REDIS_URL,
or the master Redis Sentinel names.

ARQ internals this relies on (listed with why and fingerprinted in ``app.kit.arqinternals``;
``tests/kit/test_arq_internals.py`` fails when ARQ changes one): the job record
``serialize_job`` writes and ``deserialize_job_raw`` reads, which ``enqueue_many`` writes
itself; what ``ArqRedis.enqueue_job`` stores (job key with ``expires_extra_ms``, the queue's
score) and its ``job_serializer`` attributes; the queue name and key prefixes in
``arq.constants``."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Sequence
from datetime import timedelta
from typing import Any
from urllib.parse import unquote, urlsplit

from arq.connections import ArqRedis
from arq.constants import default_queue_name, expires_extra_ms, job_key_prefix
from arq.jobs import serialize_job
from arq.utils import timestamp_ms
from redis.asyncio import ConnectionPool, Redis
from redis.asyncio.sentinel import Sentinel
from redis.exceptions import RedisError

from app.kit.redis_target import RedisTarget


def dump_job(data: dict[str, Any]) -> bytes:
    """ARQ's job and result records as JSON, not pickle: decoding what is in Redis can never
    run code, and job arguments are ids and strings anyway (ints keep all 64 bits)."""
    return json.dumps(data, separators=(",", ":"), default=_exception_name).encode()


def load_job(raw: bytes) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(raw)
    return data


def _exception_name(value: object) -> str:
    # ARQ stores a failed job's exception as its result record; keep only the type, whose
    # name carries no data. Anything else that is not JSON is a bug: refuse it.
    if isinstance(value, BaseException):
        return type(value).__name__
    raise TypeError(f"{type(value).__name__} is not a job argument (ids and strings only)")


def wake_channel(redis: Redis, queue_name: str = default_queue_name) -> str:
    """The pub/sub channel that tells the queue's workers a job is waiting. Channels belong
    to the whole server, not to a database, so the name carries the database number."""
    database = redis.connection_pool.connection_kwargs.get("db", 0)
    return f"{queue_name}:wake:{database}"


# SET NX first: a job id that is already queued or running keeps its job and its place.
# The wake-up goes out in the same call, only when something new was queued.
_ENQUEUE_MANY = """
local queue, now, ttl, prefix, channel = ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5]
local added = 0
for i = 6, #ARGV, 2 do
  if redis.call('SET', prefix .. ARGV[i], ARGV[i + 1], 'NX', 'PX', ttl) then
    redis.call('ZADD', queue, 'NX', now, ARGV[i])
    added = added + 1
  end
end
if added > 0 then
  redis.call('PUBLISH', channel, added)
end
return added
"""


class ArqQueue:
    def __init__(self, redis: ArqRedis) -> None:
        self.redis = redis
        self.wake_channel = wake_channel(redis)
        self._enqueue_many = redis.register_script(_ENQUEUE_MANY)

    async def enqueue(
        self,
        job: str,
        *args: object,
        job_id: str | None = None,
        defer_s: float = 0,
        **kwargs: object,
    ) -> bool:
        defer = timedelta(seconds=defer_s) if defer_s > 0 else None
        given: dict[str, Any] = dict(kwargs)  # the job's own keyword arguments
        queued = await self.redis.enqueue_job(job, *args, _job_id=job_id, _defer_by=defer, **given)
        if queued is None:
            return False
        # Queued all the same if this fails: a worker's fallback poll finds it.
        with contextlib.suppress(RedisError, OSError):
            await self.redis.publish(self.wake_channel, 1)
        return True

    async def enqueue_many(self, job: str, calls: Sequence[tuple[tuple[object, ...], str]]) -> None:
        """One atomic script call for a whole batch, in ARQ's own job format: the same
        guarantee as ``enqueue_job``'s WATCH (an id already queued or running is left as it
        is) for a fraction of the client-side work per job."""
        now = timestamp_ms()
        argv: list[str | bytes | int] = [
            default_queue_name,
            now,
            expires_extra_ms,
            job_key_prefix,
            self.wake_channel,
        ]
        for args, job_id in calls:
            argv += [job_id, serialize_job(job, args, {}, None, now, serializer=dump_job)]
        await self._enqueue_many(args=argv)

    async def ping(self) -> bool:
        try:
            return bool(await self.redis.ping())
        except (RedisError, OSError):
            return False

    async def close(self) -> None:
        await self.redis.aclose(close_connection_pool=True)


def redis_client(
    target: RedisTarget | str,
    *,
    socket_timeout: float | None = 2.0,
    max_connections: int | None = 64,
) -> ArqRedis:
    """An ArqRedis speaking our JSON job format, on REDIS_URL or on the master the sentinels
    name (asked again whenever a connection to it fails, so a failover is followed).
    ``socket_timeout`` None for a worker: its pub/sub connection waits for wake-ups."""
    if isinstance(target, str):
        target = RedisTarget(url=target)
    timeouts: dict[str, Any] = {"socket_connect_timeout": 1.0, "socket_timeout": socket_timeout}
    if not target.sentinels:
        pool = ConnectionPool.from_url(target.url, max_connections=max_connections, **timeouts)
        client = ArqRedis(connection_pool=pool)
    else:
        sentinel = Sentinel(  # type: ignore[no-untyped-call]
            list(target.sentinels),
            # The sentinels answer at once or not at all: never wait on one.
            sentinel_kwargs={
                "password": target.sentinel_password,
                "socket_connect_timeout": 1.0,
                "socket_timeout": 2.0,
                "ssl": target.url.startswith("rediss://"),
            },
            **_master_options(target.url),
            **timeouts,
        )
        master = sentinel.master_for(
            target.sentinel_master, redis_class=_SentinelArqRedis, max_connections=max_connections
        )
        master.sentinels_of = sentinel
        client = master
    client.job_serializer, client.job_deserializer = dump_job, load_job
    return client


class _SentinelArqRedis(ArqRedis):
    """The master's client; closing it closes the sentinels' connections too."""

    sentinels_of: Sentinel

    async def aclose(self, close_connection_pool: bool | None = None) -> None:
        await super().aclose(close_connection_pool)
        for node in self.sentinels_of.sentinels:
            await node.aclose()


def version_redis(target: RedisTarget) -> Redis:
    """A small client for cache versions, rate limits and Discord's refusals (on the master
    Sentinel names, with Sentinel): a slow or absent Redis only means no caching, no limits
    and nothing remembered."""
    return redis_client(target, socket_timeout=1.0, max_connections=8)


def _master_options(url: str) -> dict[str, Any]:
    """What REDIS_URL says about the master when the sentinels say where it is."""
    parts = urlsplit(url)
    if parts.scheme not in ("redis", "rediss"):
        raise ValueError("REDIS_URL must be redis:// or rediss:// with REDIS_SENTINELS")
    database = parts.path.lstrip("/") or "0"
    return {
        "username": unquote(parts.username) if parts.username else None,
        "password": unquote(parts.password) if parts.password else None,
        "db": int(database),
        "ssl": parts.scheme == "rediss",
    }


def create_queue(target: RedisTarget | str) -> ArqQueue:
    return ArqQueue(redis_client(target))
