"""What Discord refused, remembered for a few minutes so the same call is not made again at
once: closed DMs and missing access (403) for the route and channel (or person), an unknown
channel or message (404) for the exact path, a refused token (401) for every call.

Discord bans the bot's IP for every guild after 10,000 invalid requests (401, 403, 429) in
ten minutes. A person who keeps asking for DMs they refuse, a channel the bot lost access to,
or a job retried against either, must never get there: a remembered refusal fails the call
at once, as Discord would have, without asking. Shared through Redis by every worker."""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from redis.asyncio import Redis
from redis.exceptions import RedisError

from app.discord.errors import DiscordError, error_for

log = logging.getLogger(__name__)

REFUSAL_TTL_S = 300.0  # a 403 or a 404: long enough to stop a storm, short enough to heal
TOKEN_REFUSAL_TTL_S = 60.0  # a 401: every call would fail the same way


@dataclass(frozen=True, slots=True)
class Refusal:
    status: int
    code: int | None
    message: str  # already safe to show (no token)

    def error(self) -> DiscordError:
        return error_for(self.status, self.code, f"{self.message} (remembered, not retried)")


class Refusals(Protocol):
    async def recall(self, keys: list[str]) -> Refusal | None:
        """The first remembered refusal among ``keys``, or None."""
        ...

    async def remember(self, key: str, refusal: Refusal, ttl_s: float) -> None: ...

    async def claim(self, key: str, ttl_s: float) -> bool:
        """True the first time ``key`` is claimed within ``ttl_s`` (by any worker): a call
        Discord cannot de-duplicate (an interaction's follow-up) is made at most once."""
        ...


class LocalRefusals:
    """This process only (a client built without Redis: tests, tools)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._until: dict[str, tuple[float, Refusal]] = {}
        self._claimed: dict[str, float] = {}

    async def recall(self, keys: list[str]) -> Refusal | None:
        now = self._clock()
        for key in keys:
            held = self._until.get(key)
            if held is not None and held[0] > now:
                return held[1]
        return None

    async def remember(self, key: str, refusal: Refusal, ttl_s: float) -> None:
        self._until[key] = (self._clock() + ttl_s, refusal)

    async def claim(self, key: str, ttl_s: float) -> bool:
        now = self._clock()
        if self._claimed.get(key, 0.0) > now:
            return False
        self._claimed[key] = now + ttl_s
        return True


class RedisRefusals:
    """Shared by every worker. Redis failing means nothing is remembered (each worker still
    never retries a 4xx within a call)."""

    PREFIX = "discord:refused:"
    CLAIM = "discord:claimed:"

    def __init__(self, redis: Redis) -> None:
        self._redis = redis

    async def recall(self, keys: list[str]) -> Refusal | None:
        try:
            found = await self._redis.mget([self.PREFIX + key for key in keys])
        except (RedisError, OSError) as exc:
            log.warning("discord refusals not read", extra={"error": repr(exc)})
            return None
        for raw in found:
            if raw is not None:
                return _decode(raw)
        return None

    async def remember(self, key: str, refusal: Refusal, ttl_s: float) -> None:
        body = json.dumps([refusal.status, refusal.code, refusal.message])
        try:
            await self._redis.set(self.PREFIX + key, body, px=int(ttl_s * 1000))
        except (RedisError, OSError) as exc:
            log.warning("discord refusal not remembered", extra={"error": repr(exc)})

    async def claim(self, key: str, ttl_s: float) -> bool:
        try:
            return bool(await self._redis.set(self.CLAIM + key, "1", nx=True, px=int(ttl_s * 1000)))
        except (RedisError, OSError) as exc:
            # Unknown: make the call (a rare repeat beats an answer never given).
            log.warning("discord claim not recorded", extra={"error": repr(exc)})
            return True


def _decode(raw: bytes | str) -> Refusal | None:
    try:
        status, code, message = json.loads(raw)
        return Refusal(int(status), None if code is None else int(code), str(message))
    except (ValueError, TypeError):
        return None
