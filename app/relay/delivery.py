"""Delivery of frames to /webhook: bounded queue, one ordered lane per channel, retries."""

from __future__ import annotations

import asyncio
import logging
import random
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from enum import Enum
from urllib.parse import urlsplit, urlunsplit

import httpx
from pydantic import SecretStr

from app.relay.frames import Frame, backoff_delay, retry_after_seconds
from app.relay.metrics import RelayMetrics

log = logging.getLogger(__name__)

TOKEN_HEADER = "x-discord-gateway-token"
# With the frame's `s`, what the webhook de-duplicates events without a Discord id by.
SESSION_HEADER = "x-discord-gateway-session"

Sleep = Callable[[float], Awaitable[None]]


class Verdict(Enum):
    DELIVERED = "delivered"
    DROPPED = "dropped"  # the webhook says the frame itself is bad: retrying cannot help
    RETRY = "retry"  # a passing failure: throttled, down, unreachable
    REFUSED = "refused"  # the webhook refuses us (wrong URL, token mismatch): retry and alarm


# The only answers that condemn the frame rather than the relay's setup (docs/operations.md,
# POST /webhook): too large, or not a frame the webhook can read.
DROP_STATUSES = frozenset({413, 422})


@dataclass(frozen=True, slots=True)
class Attempt:
    verdict: Verdict
    reason: str
    status: int | None = None
    retry_after: float | None = None


def judge(response: httpx.Response, retry_after_cap: float) -> Attempt:
    """What a webhook answer means for the frame: done, never going to work, or try again.

    Anything but a 2xx, 413 or 422 is retried: a 401 or 404 means our configuration is
    wrong, and dropping would lose every event until someone noticed."""
    status = response.status_code
    if 200 <= status < 300:
        return Attempt(Verdict.DELIVERED, "ok", status)
    if status in DROP_STATUSES:
        return Attempt(Verdict.DROPPED, str(status), status)
    wait = retry_after_seconds(response.headers.get("retry-after"), retry_after_cap)
    if status == 429:
        return Attempt(Verdict.RETRY, "429", status, wait)
    if status >= 500:
        return Attempt(Verdict.RETRY, "5xx", status, wait)
    return Attempt(Verdict.REFUSED, "refused", status, wait)


@dataclass(frozen=True, slots=True)
class DeliveryConfig:
    url: str
    token: SecretStr
    capacity: int = 1000
    max_in_flight: int = 16
    retry_base_s: float = 0.5
    retry_max_s: float = 30.0

    @property
    def url_for_logs(self) -> str:
        """The webhook URL without credentials or query, which may carry secrets."""
        parts = urlsplit(self.url)
        host = parts.hostname or ""
        host = f"[{host}]" if ":" in host else host  # an IPv6 literal keeps its brackets
        netloc = f"{host}:{parts.port}" if parts.port else host
        return urlunsplit((parts.scheme, netloc, parts.path, "", ""))


class DeliveryClosed(RuntimeError):
    """submit() after drain() began."""


class Delivery:
    """Frames wait in per-channel lanes; each lane delivers in order, lanes run concurrently.

    ``capacity`` bounds the frames queued or in flight: ``submit`` waits for room, which is
    the back-pressure on the gateway reader."""

    def __init__(
        self,
        http: httpx.AsyncClient,
        config: DeliveryConfig,
        metrics: RelayMetrics,
        *,
        sleep: Sleep = asyncio.sleep,
        rand: Callable[[], float] = random.random,
    ) -> None:
        self._http = http
        self._config = config
        self._metrics = metrics
        self._sleep = sleep
        self._rand = rand
        self._room = asyncio.Semaphore(config.capacity)
        self._in_flight = asyncio.Semaphore(config.max_in_flight)
        self._lanes: dict[str, deque[Frame]] = {}
        self._current: dict[str, Frame] = {}
        self._workers: dict[str, asyncio.Task[None]] = {}
        self._pending = 0
        self._closed = False

    @property
    def pending(self) -> int:
        return self._pending

    async def submit(self, frame: Frame) -> None:
        if self._closed:
            raise DeliveryClosed("delivery is draining")
        await self._room.acquire()
        if self._closed:  # drain began while we waited for room
            self._room.release()
            raise DeliveryClosed("delivery is draining")
        self._set_pending(+1)
        lane = self._lanes.setdefault(frame.channel_key, deque())
        lane.append(frame)
        if frame.channel_key not in self._workers:
            task = asyncio.create_task(self._run_lane(frame.channel_key))
            self._workers[frame.channel_key] = task

    async def drain(self, deadline_s: float) -> list[Frame]:
        """Stop taking frames, deliver what is queued within the deadline; return what is left."""
        self._closed = True
        workers = list(self._workers.values())
        if workers:
            await asyncio.wait(workers, timeout=deadline_s)
        left: list[Frame] = []
        for key, task in list(self._workers.items()):
            task.cancel()
            current = self._current.get(key)
            left.extend([current] if current is not None else [])
            left.extend(self._lanes.get(key, ()))
        await asyncio.gather(*workers, return_exceptions=True)
        for frame in left:
            self._metrics.dropped.labels(reason="shutdown").inc()
            log.error(
                "frame left undelivered at shutdown",
                extra={"t": frame.t, "event_id": frame.event_id, "seq": frame.s},
            )
        return left

    def _set_pending(self, delta: int) -> None:
        self._pending += delta
        self._metrics.queue_depth.set(self._pending)

    async def _run_lane(self, key: str) -> None:
        lane = self._lanes[key]
        try:
            while lane:
                frame = lane.popleft()
                self._current[key] = frame
                try:
                    await self._deliver(frame)
                except Exception:
                    # A bug must not wedge the lane (and with it the whole queue).
                    self._metrics.dropped.labels(reason="error").inc()
                    log.exception(
                        "frame delivery crashed; dropped",
                        extra={"t": frame.t, "event_id": frame.event_id},
                    )
                del self._current[key]
                self._set_pending(-1)
                self._room.release()
        finally:
            # No await between the emptiness check and these deletions: submit cannot slip in.
            if not lane:
                self._lanes.pop(key, None)
            self._workers.pop(key, None)

    async def _deliver(self, frame: Frame) -> None:
        attempt_no = 0
        while True:
            attempt = await self._attempt(frame)
            if attempt.verdict is Verdict.DELIVERED:
                self._metrics.forwarded.inc()
                return
            if attempt.verdict is Verdict.DROPPED:
                self._metrics.dropped.labels(reason=attempt.reason).inc()
                log.error(
                    "webhook rejected frame; dropped",
                    extra={"t": frame.t, "event_id": frame.event_id, "status": attempt.status},
                )
                return
            delay = attempt.retry_after
            if delay is None:
                delay = backoff_delay(
                    attempt_no, self._config.retry_base_s, self._config.retry_max_s, self._rand
                )
            self._metrics.retried.labels(reason=attempt.reason).inc()
            self._report_retry(frame, attempt, attempt_no + 1, delay)
            await self._sleep(delay)
            attempt_no += 1

    def _report_retry(self, frame: Frame, attempt: Attempt, attempt_no: int, delay: float) -> None:
        fields = {
            "t": frame.t,
            "event_id": frame.event_id,
            "reason": attempt.reason,
            "status": attempt.status,
            "attempt": attempt_no,
            "delay_s": round(delay, 3),
        }
        if attempt.verdict is Verdict.REFUSED:
            # Not a passing failure: every frame will meet it until someone fixes the setup.
            self._metrics.refused.labels(status=str(attempt.status)).inc()
            log.error(
                "webhook refused the relay; retrying (check WEBHOOK_URL and GATEWAY_TOKEN)",
                extra={**fields, "webhook": self._config.url_for_logs},
            )
        else:
            log.warning("webhook delivery failed; retrying", extra=fields)

    async def _attempt(self, frame: Frame) -> Attempt:
        headers = {
            "content-type": "application/json",
            TOKEN_HEADER: self._config.token.get_secret_value(),
        }
        if frame.session is not None:
            headers[SESSION_HEADER] = frame.session
        async with self._in_flight:
            try:
                response = await self._http.post(
                    self._config.url, content=frame.body, headers=headers
                )
            except httpx.TimeoutException:
                return Attempt(Verdict.RETRY, "timeout")
            except httpx.TransportError:
                return Attempt(Verdict.RETRY, "connection")
            except httpx.HTTPError:
                return Attempt(Verdict.RETRY, "error")
        return judge(response, self._config.retry_max_s)
