"""Sharding as Discord defines it: which shards this process holds, and when each may IDENTIFY.

Pure decisions over plain data, plus the one small clock-driven limiter the shards share."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final, Literal

AUTO: Final = "auto"
# Discord lets each identify bucket (shard_id % max_concurrency) IDENTIFY once per 5 seconds.
IDENTIFY_INTERVAL_S = 5.0

ShardCount = int | Literal["auto"]


def parse_shard_count(value: object) -> ShardCount:
    """RELAY_SHARD_COUNT: a positive integer, or ``auto`` (blank means auto too)."""
    if value is None or (isinstance(value, str) and value.strip().lower() in ("", AUTO)):
        return AUTO
    text = value.strip() if isinstance(value, str) else value
    if isinstance(text, bool) or not isinstance(text, int | str):
        raise ValueError("must be a positive integer or auto")
    try:
        count = int(text)
    except ValueError:
        raise ValueError("must be a positive integer or auto") from None
    if count < 1:
        raise ValueError("must be a positive integer or auto")
    return count


def parse_shard_ids(text: str, count: ShardCount) -> tuple[int, ...]:
    """RELAY_SHARD_IDS: comma-separated, distinct ids in 0..count-1 (an explicit count)."""
    parts = [part.strip() for part in text.split(",")]
    if not all(part.isascii() and part.isdigit() for part in parts):
        raise ValueError("must be comma-separated shard ids (non-negative integers)")
    ids = tuple(int(part) for part in parts)
    if len(set(ids)) != len(ids):
        raise ValueError("lists a shard twice")
    if not isinstance(count, int):
        # Processes that split the shards must agree on the count; "auto" may differ between
        # them, and the guilds of any shard nobody holds would go unheard.
        raise ValueError("needs an explicit RELAY_SHARD_COUNT, not auto")
    outside = [i for i in ids if i >= count]
    if outside:
        raise ValueError(f"has shard {outside[0]}, outside 0..{count - 1} (RELAY_SHARD_COUNT)")
    return ids


def shard_of_pod(pod_name: str, count: ShardCount, ids: str | None) -> int:
    """RELAY_POD_NAME: a StatefulSet pod is ``<set name>-<ordinal>``, and holds the shard whose
    id is its ordinal, so N replicas with RELAY_SHARD_COUNT=N run shards 0..N-1."""
    base, _, ordinal = pod_name.strip().rpartition("-")
    if not (base and ordinal.isascii() and ordinal.isdigit()):
        raise ValueError("must end in -<ordinal>, as a StatefulSet names its pods")
    if ids is not None:
        raise ValueError("and RELAY_SHARD_IDS both name the shards: set one")
    if not isinstance(count, int):
        raise ValueError("needs an explicit RELAY_SHARD_COUNT (the StatefulSet's replicas)")
    if int(ordinal) >= count:
        raise ValueError(
            f"is ordinal {int(ordinal)}, outside 0..{count - 1}: scale the StatefulSet and "
            "RELAY_SHARD_COUNT together"
        )
    return int(ordinal)


@dataclass(frozen=True, slots=True)
class GatewayBot:
    """What GET /gateway/bot answers: where to connect, how many shards, how fast to identify."""

    url: str
    shards: int = 1
    max_concurrency: int = 1
    remaining: int | None = None  # session starts (identifies) left until the daily reset


def _positive(value: object, default: int) -> int:
    return (
        value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else default
    )


def parse_gateway_bot(body: object) -> GatewayBot:
    if not isinstance(body, Mapping):
        raise ValueError("GET /gateway/bot answered without a JSON object")
    url = body.get("url")
    if not isinstance(url, str) or not url:
        raise ValueError("GET /gateway/bot answered without a url")
    raw_limit = body.get("session_start_limit")
    limit: Mapping[str, Any] = raw_limit if isinstance(raw_limit, Mapping) else {}
    remaining = limit.get("remaining")
    return GatewayBot(
        url=url,
        shards=_positive(body.get("shards"), 1),
        max_concurrency=_positive(limit.get("max_concurrency"), 1),
        remaining=remaining if isinstance(remaining, int) else None,
    )


@dataclass(frozen=True, slots=True)
class ShardPlan:
    count: int
    ids: tuple[int, ...]
    max_concurrency: int


def plan_shards(
    count: ShardCount, ids: tuple[int, ...] | None, bot: GatewayBot | None
) -> ShardPlan:
    """The shards to hold. ``auto`` is Discord's recommendation, or 1 when nothing was asked
    (DISCORD_GATEWAY_URL set); without an answer, identify as if max_concurrency were 1."""
    total = count if isinstance(count, int) else (bot.shards if bot else 1)
    return ShardPlan(
        count=total,
        ids=ids if ids is not None else tuple(range(total)),
        max_concurrency=bot.max_concurrency if bot else 1,
    )


def identify_bucket(shard_id: int, max_concurrency: int) -> int:
    return shard_id % max_concurrency


def identify_delay(last: float | None, now: float, interval: float) -> float:
    """Seconds to wait before a bucket whose last IDENTIFY was at ``last`` may identify again."""
    return 0.0 if last is None else max(0.0, last + interval - now)


class IdentifyLimiter:
    """Lets each bucket IDENTIFY at most once per interval; buckets do not wait for each other.

    Only IDENTIFY goes through it: a RESUME starts no new session and is not limited."""

    def __init__(
        self,
        max_concurrency: int,
        interval_s: float = IDENTIFY_INTERVAL_S,
        *,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self._max_concurrency = max_concurrency
        self._interval = interval_s
        self._clock = clock
        self._sleep = sleep
        self._locks: dict[int, asyncio.Lock] = {}
        self._last: dict[int, float] = {}

    async def wait_turn(self, shard_id: int) -> None:
        bucket = identify_bucket(shard_id, self._max_concurrency)
        async with self._locks.setdefault(bucket, asyncio.Lock()):
            delay = identify_delay(self._last.get(bucket), self._clock(), self._interval)
            if delay > 0:
                await self._sleep(delay)
            self._last[bucket] = self._clock()
