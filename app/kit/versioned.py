"""A per-process cache kept honest by a shared version number in Redis: whoever changes the
source bumps the version, and every process drops its entries the next time it sees a new
one (one Redis GET per lookup, far cheaper than the database read it saves). Without Redis
nothing is cached, so a stale entry can outlive a change by at most ``ttl_s``, and only when
a bump was lost after its change was committed."""

from __future__ import annotations

import logging
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Hashable
from typing import Generic, TypeVar

from redis.asyncio import Redis
from redis.exceptions import RedisError

log = logging.getLogger(__name__)

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class RedisVersion:
    """One version counter (a Redis key shared by every process)."""

    def __init__(self, redis: Redis, key: str) -> None:
        self._redis = redis
        self._key = key

    async def current(self) -> int | None:
        """The version now; None when Redis cannot say (then nothing may be trusted)."""
        try:
            raw = await self._redis.get(self._key)
        except (RedisError, OSError):
            return None
        return int(raw) if raw is not None else 0

    async def bump(self) -> bool:
        """Tell every process its entries are stale; False when Redis was not reached."""
        try:
            await self._redis.incr(self._key)
        except (RedisError, OSError) as exc:
            log.warning("cache version not bumped", extra={"key": self._key, "error": repr(exc)})
            return False
        return True


class Unshared:
    """A version nobody else changes: entries live out their ``ttl_s`` in this process only
    (for facts that only age, such as "this message was not found")."""

    async def current(self) -> int:
        return 0

    async def bump(self) -> bool:
        return True


class VersionedCache(Generic[K, V]):
    """Entries are served while the shared version is unchanged and younger than ``ttl_s``;
    at most ``max_entries``, oldest dropped first."""

    def __init__(
        self,
        version: RedisVersion | Unshared | None,
        *,
        ttl_s: float = 60.0,
        max_entries: int = 10_000,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._version = version
        self._ttl_s = ttl_s
        self._max = max_entries
        self._clock = clock
        self._seen: int | None = None
        self._entries: OrderedDict[K, tuple[float, V]] = OrderedDict()

    async def get(self, key: K, load: Callable[[], Awaitable[V]]) -> V:
        """The cached value for ``key``, or ``load()``'s (cached when the version is known)."""
        trusted = await self._sync()
        if trusted and (hit := self._fresh(key)) is not None:
            return hit
        value = await load()
        if trusted:
            self._store(key, value)
        return value

    async def peek(self, key: K) -> V | None:
        """The cached value, or None (nothing cached, stale, or no version to trust)."""
        return self._fresh(key) if await self._sync() else None

    async def put(self, key: K, value: V) -> None:
        if await self._sync():
            self._store(key, value)

    async def _sync(self) -> bool:
        """Drop every entry when the shared version moved; False when it is unknown."""
        version = await self._version.current() if self._version is not None else None
        if version is None:
            return False
        if version != self._seen:
            self._entries.clear()
            self._seen = version
        return True

    def _fresh(self, key: K) -> V | None:
        hit = self._entries.get(key)
        if hit is None or self._clock() - hit[0] >= self._ttl_s:
            return None
        return hit[1]

    def _store(self, key: K, value: V) -> None:
        self._entries[key] = (self._clock(), value)
        self._entries.move_to_end(key)
        while len(self._entries) > self._max:
            self._entries.popitem(last=False)

    async def invalidate(self) -> bool:
        """After a committed change: every process (this one at once) loads afresh."""
        self._entries.clear()
        return await self._version.bump() if self._version is not None else False
