"""The per-process cache of channel rules and how a change reaches every process: a shared
version in (real) Redis, bumped after each committed change."""

from __future__ import annotations

import httpx
from redis.asyncio import Redis

from app.kit.versioned import RedisVersion, Unshared, VersionedCache
from app.turn.events import handle_event
from app.wiring import open_services
from tests.support.frames import message_create
from tests.support.servers import free_port
from tests.support.stack import BOT_ID, Stack

KEY = "test:cache-version"


class Source:
    """What the cache stands in front of, counting its reads."""

    def __init__(self) -> None:
        self.value, self.reads = "first", 0

    async def read(self) -> str:
        self.reads += 1
        return self.value


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


async def test_a_bump_in_one_process_drops_the_others_entries(redis: Redis) -> None:
    source = Source()
    here = VersionedCache[str, str](RedisVersion(redis, KEY))
    there = VersionedCache[str, str](RedisVersion(redis, KEY))
    assert await here.get("k", source.read) == "first"
    assert await here.get("k", source.read) == "first"
    assert source.reads == 1

    source.value = "second"
    assert await there.invalidate()  # the process that changed it
    assert await here.get("k", source.read) == "second"
    assert source.reads == 2


async def test_an_entry_ages_out_even_when_a_bump_was_lost(redis: Redis) -> None:
    clock, source = Clock(), Source()
    cache = VersionedCache[str, str](RedisVersion(redis, KEY), ttl_s=60, clock=clock)
    await cache.get("k", source.read)
    source.value = "second"  # changed, but nobody bumped
    clock.now += 59
    assert await cache.get("k", source.read) == "first"
    clock.now += 2
    assert await cache.get("k", source.read) == "second"


async def test_without_redis_nothing_is_cached() -> None:
    unreachable = Redis(port=free_port(), socket_connect_timeout=0.2)
    source = Source()
    cache = VersionedCache[str, str](RedisVersion(unreachable, KEY))
    await cache.get("k", source.read)
    await cache.get("k", source.read)
    assert source.reads == 2
    assert not await cache.invalidate()
    await unreachable.aclose()


async def test_an_unshared_cache_keeps_what_it_was_told(redis: Redis) -> None:
    cache = VersionedCache[int, bool](Unshared(), ttl_s=60)
    assert await cache.peek(1) is None
    await cache.put(1, True)
    assert await cache.peek(1) is True


async def test_a_worker_with_warm_rules_obeys_an_admin_change_at_once(stack: Stack) -> None:
    """The admin API (another process) turns a channel off; a worker that already cached
    the channel's rules stays quiet on the very next message."""
    mention = f"<@{BOT_ID}>"
    async with open_services(stack.settings) as worker:
        first = message_create(content=f"{mention} hi")
        await stack.post(first)
        await handle_event(worker, first["d"]["id"])
        assert len(stack.replies()) == 1  # the rules are now cached in this "worker"

        async with httpx.AsyncClient(base_url=stack.api) as http:
            answer = await http.put(
                "/channels/300/settings",
                json={"mode": "off"},
                headers={"Authorization": "Bearer test-admin-secret-8c2e4a6f1d3b5907"},
            )
        assert answer.status_code == 200

        second = message_create(content=f"{mention} still there?")
        await stack.post(second)
        await handle_event(worker, second["d"]["id"])
        assert len(stack.replies()) == 1
        assert stack.discord.reactions_on(int(second["d"]["id"])) == []
