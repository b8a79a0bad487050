"""Per-person rate limits, counted in Redis so that every worker and API replica shares them:
a sliding window per person and limit (a sorted set of the admitted events, scored by time),
and "one notice per person per window" (a key that lives as long as the window).

Each check is one Lua script, atomic on the Redis server, keyed by the event: a retried job
gets the answer its first run got and spends no second slot. Without Redis the limiter lets
everything through (and counts that): a rate limit is not worth refusing a person over."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from enum import StrEnum

from prometheus_client import Counter
from redis.asyncio import Redis
from redis.exceptions import RedisError

log = logging.getLogger(__name__)

WINDOW_S = 60.0  # "in any rolling minute"

LIMIT_CHECKS = Counter(
    "rate_limit_checks_total",
    "Per-person rate-limit checks by limit and outcome (allowed, limited, unavailable).",
    ["limit", "outcome"],
)


class Limit(StrEnum):
    TURNS = "turns"  # TURNS_PER_USER_PER_MINUTE
    COMMANDS = "commands"  # COMMANDS_PER_USER_PER_MINUTE
    AUTOCOMPLETE = "autocomplete"  # AUTOCOMPLETE_PER_USER_PER_MINUTE


# KEYS: the admitted set, the refused set. ARGV: now (ms), window (ms), limit, the event.
# An event seen before keeps its answer; a new one is admitted while fewer than the limit
# were admitted within the window. Both sets expire with the window once nobody writes.
_ADMIT = """
local admitted, refused = KEYS[1], KEYS[2]
local now, span, limit, event = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3]), ARGV[4]
redis.call('ZREMRANGEBYSCORE', admitted, '-inf', now - span)
redis.call('ZREMRANGEBYSCORE', refused, '-inf', now - span)
if redis.call('ZSCORE', admitted, event) then return 1 end
if redis.call('ZSCORE', refused, event) then return 0 end
local into, answer = refused, 0
if redis.call('ZCARD', admitted) < limit then into, answer = admitted, 1 end
redis.call('ZADD', into, now, event)
redis.call('PEXPIRE', into, span)
return answer
"""

# KEYS: the notice key. ARGV: the event, its lifetime (ms). The first event takes it; the
# same event asking again (a retried job) still may send (its nonce keeps it to one post).
_NOTICE = """
local holder = redis.call('GET', KEYS[1])
if not holder then
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
  return 1
end
if holder == ARGV[1] then return 1 end
return 0
"""


class Limiter:
    """``clock`` (seconds, wall time shared by the hosts) is injectable for tests."""

    def __init__(self, redis: Redis, *, clock: Callable[[], float] = time.time) -> None:
        self._admit = redis.register_script(_ADMIT)
        self._notice = redis.register_script(_NOTICE)
        self._clock = clock

    async def admit(self, limit: Limit, user_id: int, event_id: str, per_window: int) -> bool:
        """Whether ``event_id`` is within ``user_id``'s ``per_window`` for ``limit``."""
        keys = [_key(limit, user_id), _key(limit, user_id, "refused")]
        args: list[str | int] = [self._now_ms(), int(WINDOW_S * 1000), per_window, event_id]
        try:
            admitted = bool(await self._admit(keys=keys, args=args))
        except (RedisError, OSError) as exc:
            LIMIT_CHECKS.labels(limit=limit.value, outcome="unavailable").inc()
            log.warning("rate limit not checked", extra={"limit": limit, "error": repr(exc)})
            return True
        outcome = "allowed" if admitted else "limited"
        LIMIT_CHECKS.labels(limit=limit.value, outcome=outcome).inc()
        return admitted

    async def notice_due(self, kind: str, user_id: int, event_id: str, every_s: float) -> bool:
        """Whether this event tells ``user_id`` about ``kind``: the first in ``every_s``
        does. False when Redis cannot say (silence rather than a notice per message)."""
        try:
            due = await self._notice(
                keys=[_key(kind, user_id, "notice")], args=[event_id, int(every_s * 1000)]
            )
        except (RedisError, OSError) as exc:
            log.warning("notice not decided", extra={"kind": kind, "error": repr(exc)})
            return False
        return bool(due)

    def _now_ms(self) -> int:
        return int(self._clock() * 1000)


def _key(kind: str, user_id: int, *suffix: str) -> str:
    # The person's id as the hash tag: one person's keys live on one Redis Cluster slot.
    return ":".join(("limit", kind, f"{{{user_id}}}", *suffix))
