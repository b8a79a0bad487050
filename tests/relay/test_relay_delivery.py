"""Relay delivery against a local webhook that refuses, hangs, throttles, fails, then recovers."""

from __future__ import annotations

import asyncio
import json
import logging
from collections import Counter, defaultdict
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import httpx
import pytest
from pydantic import SecretStr
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from app.relay.delivery import (
    TOKEN_HEADER,
    Attempt,
    Delivery,
    DeliveryClosed,
    DeliveryConfig,
    Verdict,
    judge,
)
from app.relay.frames import Frame, to_frame
from app.relay.metrics import RelayMetrics
from tests.support.servers import free_port, serve

TOKEN = "relay-test-gateway-token-0123456789abcdef"

# (frame id, attempt number as seen by the webhook) -> the answer
Plan = Callable[[str, int], Awaitable[Response]]


async def always_ok(frame_id: str, attempt: int) -> Response:
    return JSONResponse({"status": "ok"})


class FakeWebhook:
    """A local /webhook: answers by plan, records every attempt and each 2xx-answered frame."""

    def __init__(self, plan: Plan = always_ok, *, expect: int = 0) -> None:
        self.plan = plan
        self.expect = expect
        self.attempts: Counter[str] = Counter()
        self.accepted: list[dict[str, Any]] = []
        self.bodies: dict[str, bytes] = {}
        self.tokens: set[str | None] = set()
        self.in_flight = 0
        self.max_in_flight = 0
        self.all_accepted = asyncio.Event()
        self.app = Starlette(routes=[Route("/webhook", self.handle, methods=["POST"])])

    async def handle(self, request: Request) -> Response:
        self.tokens.add(request.headers.get(TOKEN_HEADER))
        body = await request.body()
        frame = json.loads(body)
        frame_id = str(frame["d"]["id"])
        self.attempts[frame_id] += 1
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            response = await self.plan(frame_id, self.attempts[frame_id])
        finally:
            self.in_flight -= 1
        if 200 <= response.status_code < 300:
            self.accepted.append(frame)
            self.bodies[frame_id] = body
            if len(self.accepted) >= self.expect:
                self.all_accepted.set()
        return response


def make_frame(frame_id: int, channel: str, seq: int, t: str = "MESSAGE_CREATE") -> Frame:
    # Odd spacing and non-ASCII text: the webhook must get these exact bytes.
    raw = (
        f'{{"t": "{t}", "s": {seq}, "op": 0, '
        f'"d": {{"id": "{frame_id}", "channel_id": "{channel}", "content": "héllo ✓ {seq}"}}}}'
    )
    return to_frame(json.loads(raw), raw)


class RecordingSleep:
    """The retry sleep: records each delay, wakes waiters after n calls, sleeps briefly."""

    def __init__(self) -> None:
        self.delays: list[float] = []
        self._waiters: list[tuple[int, asyncio.Event]] = []

    async def __call__(self, delay: float) -> None:
        self.delays.append(delay)
        for count, event in self._waiters:
            if len(self.delays) >= count:
                event.set()
        await asyncio.sleep(min(delay, 0.01))

    async def until(self, count: int) -> None:
        event = asyncio.Event()
        self._waiters.append((count, event))
        if len(self.delays) >= count:
            event.set()
        await asyncio.wait_for(event.wait(), 5)


@asynccontextmanager
async def delivery_to(
    url: str,
    metrics: RelayMetrics,
    sleep: RecordingSleep,
    *,
    capacity: int = 100,
    http_timeout_s: float = 5.0,
) -> AsyncIterator[Delivery]:
    config = DeliveryConfig(
        url=url,
        token=SecretStr(TOKEN),
        capacity=capacity,
        max_in_flight=8,
        retry_base_s=0.004,
        retry_max_s=0.01,
    )
    async with httpx.AsyncClient(timeout=http_timeout_s) as http:
        yield Delivery(http, config, metrics, sleep=sleep, rand=lambda: 0.5)


async def test_frames_survive_refusal_timeout_429_and_5xx_each_accepted_exactly_once() -> None:
    release_hung = asyncio.Event()

    async def flaky(frame_id: str, attempt: int) -> Response:
        if frame_id == "2" and attempt == 1:
            await release_hung.wait()  # outlives the relay's 0.3 s timeout
            return Response(status_code=500)
        if frame_id == "3" and attempt <= 2:
            return Response(status_code=429, headers={"retry-after": "0.007"})
        if frame_id == "4" and attempt <= 3:
            return Response(status_code=503)
        if frame_id == "5" and attempt == 1:
            return Response(status_code=500)
        if frame_id == "6" and attempt == 1:
            return Response(status_code=429)  # no Retry-After: plain backoff
        return JSONResponse({"status": "ok" if attempt == 1 else "duplicate"})

    frames = [make_frame(i, f"c{i % 3}", i) for i in range(1, 13)]
    hook = FakeWebhook(flaky, expect=len(frames))
    metrics, sleep = RelayMetrics(), RecordingSleep()
    port = free_port()  # nothing listens yet: connections are refused
    url = f"http://127.0.0.1:{port}/webhook"
    async with delivery_to(url, metrics, sleep, http_timeout_s=0.3) as d:
        for frame in frames:
            await d.submit(frame)
        await sleep.until(6)
        assert metrics.value("relay_delivery_retries_total", reason="connection") >= 6
        async with serve(hook.app, port=port):
            try:
                await asyncio.wait_for(hook.all_accepted.wait(), 8)
            finally:
                release_hung.set()
        assert await d.drain(1) == []

    assert Counter(str(f["d"]["id"]) for f in hook.accepted) == {str(i): 1 for i in range(1, 13)}
    assert all(hook.bodies[str(i)] == frames[i - 1].body for i in range(1, 13))
    assert hook.tokens == {TOKEN}
    assert metrics.value("relay_delivery_retries_total", reason="timeout") >= 1
    assert metrics.value("relay_delivery_retries_total", reason="429") >= 3
    assert metrics.value("relay_delivery_retries_total", reason="5xx") >= 4
    assert 0.007 in sleep.delays  # Retry-After honoured
    assert metrics.value("relay_frames_forwarded_total") == 12
    assert metrics.total("relay_frames_dropped_total") == 0
    assert metrics.total("relay_webhook_refused_total") == 0
    assert metrics.value("relay_queue_depth") == 0


async def test_backoff_grows_exponentially_with_full_jitter_up_to_the_cap() -> None:
    async def down_four_times(frame_id: str, attempt: int) -> Response:
        return Response(status_code=503) if attempt <= 4 else JSONResponse({"status": "ok"})

    hook = FakeWebhook(down_four_times, expect=1)
    metrics, sleep = RelayMetrics(), RecordingSleep()
    async with serve(hook.app) as base, delivery_to(f"{base}/webhook", metrics, sleep) as d:
        await d.submit(make_frame(1, "c", 1))
        await asyncio.wait_for(hook.all_accepted.wait(), 5)
        await d.drain(1)
    # rand() is 0.5: half of min(cap=0.01, 0.004·2^n)
    assert sleep.delays == pytest.approx([0.002, 0.004, 0.005, 0.005])


async def test_channel_order_is_kept_while_channels_deliver_concurrently() -> None:
    other_channel_seen = asyncio.Event()
    overlapped: list[bool] = []

    async def interleaving(frame_id: str, attempt: int) -> Response:
        if frame_id == "1":  # channel a's first frame waits for channel b to arrive
            try:
                await asyncio.wait_for(other_channel_seen.wait(), 5)
                overlapped.append(True)
            except TimeoutError:
                overlapped.append(False)
        if int(frame_id) % 3 == 2:
            other_channel_seen.set()
        if int(frame_id) % 4 == 0 and attempt == 1:
            return Response(status_code=503)  # retries must not reorder the lane
        return JSONResponse({"status": "ok"})

    channels = ["a", "b", "c"]
    frames = [make_frame(i, channels[(i - 1) % 3], i) for i in range(1, 31)]
    hook = FakeWebhook(interleaving, expect=len(frames))
    metrics, sleep = RelayMetrics(), RecordingSleep()
    async with serve(hook.app) as base, delivery_to(f"{base}/webhook", metrics, sleep) as d:
        for frame in frames:
            await d.submit(frame)
        await asyncio.wait_for(hook.all_accepted.wait(), 8)
        await d.drain(1)

    order: dict[str, list[int]] = defaultdict(list)
    for accepted in hook.accepted:
        data = accepted["d"]
        assert isinstance(data, dict)
        order[data["channel_id"]].append(int(data["id"]))
    submitted = {ch: [i for i in range(1, 31) if channels[(i - 1) % 3] == ch] for ch in channels}
    assert order == submitted
    assert overlapped == [True]
    assert hook.max_in_flight >= 2


async def test_full_queue_makes_submit_wait_until_room_frees() -> None:
    release = asyncio.Event()
    two_in = asyncio.Event()

    async def blocked(frame_id: str, attempt: int) -> Response:
        if hook.in_flight >= 2:
            two_in.set()
        await release.wait()
        return JSONResponse({"status": "ok"})

    hook = FakeWebhook(blocked, expect=3)
    metrics, sleep = RelayMetrics(), RecordingSleep()
    async with (
        serve(hook.app) as base,
        delivery_to(f"{base}/webhook", metrics, sleep, capacity=2) as d,
    ):
        await d.submit(make_frame(1, "a", 1))
        await d.submit(make_frame(2, "b", 2))
        await asyncio.wait_for(two_in.wait(), 5)
        third = asyncio.create_task(d.submit(make_frame(3, "c", 3)))
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(asyncio.shield(third), 0.2)
        assert metrics.value("relay_queue_depth") == 2
        release.set()
        await asyncio.wait_for(third, 5)
        await asyncio.wait_for(hook.all_accepted.wait(), 5)
        assert await d.drain(1) == []
    assert sorted(str(f["d"]["id"]) for f in hook.accepted) == ["1", "2", "3"]


@pytest.mark.parametrize("status", [200, 201, 204])
def test_judge_counts_any_2xx_as_delivered(status: int) -> None:
    assert judge(httpx.Response(status), 30).verdict is Verdict.DELIVERED


@pytest.mark.parametrize("status", [413, 422])
def test_judge_drops_only_what_the_webhook_calls_a_bad_frame(status: int) -> None:
    assert judge(httpx.Response(status), 30) == Attempt(Verdict.DROPPED, str(status), status)


@pytest.mark.parametrize("status", [301, 307, 400, 401, 403, 404, 405, 409, 410, 418])
def test_judge_retries_every_other_refusal_and_flags_it(status: int) -> None:
    attempt = judge(httpx.Response(status, headers={"retry-after": "2"}), 30)
    assert (attempt.verdict, attempt.status, attempt.retry_after) == (Verdict.REFUSED, status, 2)


@pytest.mark.parametrize(("status", "reason"), [(429, "429"), (500, "5xx"), (503, "5xx")])
def test_judge_retries_throttling_and_server_errors_quietly(status: int, reason: str) -> None:
    attempt = judge(httpx.Response(status, headers={"retry-after": "99"}), 30)
    assert (attempt.verdict, attempt.reason, attempt.retry_after) == (Verdict.RETRY, reason, 30)


def test_the_webhook_url_is_logged_without_credentials_or_query() -> None:
    config = DeliveryConfig(
        url="https://user:pw@api.example:8443/webhook?key=k", token=SecretStr("t")
    )
    assert config.url_for_logs == "https://api.example:8443/webhook"
    assert DeliveryConfig(url="http://[::1]/webhook", token=SecretStr("t")).url_for_logs == (
        "http://[::1]/webhook"
    )


async def test_a_404_is_retried_until_the_webhook_answers_and_counted_as_refused(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async def wrong_url_then_fixed(frame_id: str, attempt: int) -> Response:
        if frame_id == "1" and attempt <= 3:
            return JSONResponse({"detail": "Not Found"}, status_code=404)
        return JSONResponse({"status": "ok"})

    hook = FakeWebhook(wrong_url_then_fixed, expect=2)
    metrics, sleep = RelayMetrics(), RecordingSleep()
    caplog.set_level(logging.INFO, logger="app.relay")
    async with serve(hook.app) as base, delivery_to(f"{base}/webhook", metrics, sleep) as d:
        await d.submit(make_frame(1, "a", 1))
        await d.submit(make_frame(2, "a", 2))  # same lane: waits behind the refused frame
        await asyncio.wait_for(hook.all_accepted.wait(), 5)
        assert await d.drain(1) == []

    assert hook.attempts == {"1": 4, "2": 1}
    assert [str(f["d"]["id"]) for f in hook.accepted] == ["1", "2"]  # once each, in order
    assert metrics.value("relay_webhook_refused_total", status="404") == 3
    assert metrics.value("relay_delivery_retries_total", reason="refused") == 3
    assert metrics.value("relay_frames_forwarded_total") == 2
    assert metrics.total("relay_frames_dropped_total") == 0
    assert sleep.delays == pytest.approx([0.002, 0.004, 0.005])  # backoff, capped
    refusals = [r for r in caplog.records if r.getMessage().startswith("webhook refused")]
    assert len(refusals) == 3
    assert all(r.levelno == logging.ERROR for r in refusals)
    assert {(r.status, r.event_id) for r in refusals} == {(404, "1")}  # type: ignore[attr-defined]
    assert TOKEN not in caplog.text
    assert all(TOKEN not in str(vars(r)) for r in caplog.records)


async def test_a_401_is_retried_honouring_retry_after_never_dropped() -> None:
    async def token_mismatch_twice(frame_id: str, attempt: int) -> Response:
        if attempt <= 2:
            return Response(status_code=401, headers={"retry-after": "0.003"})
        return JSONResponse({"status": "ok"})

    hook = FakeWebhook(token_mismatch_twice, expect=1)
    metrics, sleep = RelayMetrics(), RecordingSleep()
    async with serve(hook.app) as base, delivery_to(f"{base}/webhook", metrics, sleep) as d:
        await d.submit(make_frame(7, "a", 7))
        await asyncio.wait_for(hook.all_accepted.wait(), 5)
        assert await d.drain(1) == []

    assert hook.attempts["7"] == 3
    assert len(hook.accepted) == 1
    assert sleep.delays == [0.003, 0.003]
    assert metrics.value("relay_webhook_refused_total", status="401") == 2
    assert metrics.total("relay_frames_dropped_total") == 0


@pytest.mark.parametrize("status", [413, 422])
async def test_a_bad_frame_answer_is_dropped_once_counted_and_logged_without_the_token(
    status: int, caplog: pytest.LogCaptureFixture
) -> None:
    async def refuses_two(frame_id: str, attempt: int) -> Response:
        if frame_id == "2":
            return JSONResponse({"error": "bad frame"}, status_code=status)
        return JSONResponse({"status": "ok"})

    hook = FakeWebhook(refuses_two, expect=2)
    metrics, sleep = RelayMetrics(), RecordingSleep()
    caplog.set_level(logging.INFO, logger="app.relay")
    async with serve(hook.app) as base, delivery_to(f"{base}/webhook", metrics, sleep) as d:
        for i in (1, 2, 3):
            await d.submit(make_frame(i, "a", i, t="MESSAGE_UPDATE"))
        await asyncio.wait_for(hook.all_accepted.wait(), 5)
        assert await d.drain(1) == []

    assert hook.attempts["2"] == 1  # never retried
    assert [str(f["d"]["id"]) for f in hook.accepted] == ["1", "3"]
    assert metrics.value("relay_frames_dropped_total", reason=str(status)) == 1
    assert metrics.total("relay_frames_dropped_total") == 1
    assert metrics.total("relay_webhook_refused_total") == 0
    assert sleep.delays == []
    drops = [r for r in caplog.records if r.getMessage() == "webhook rejected frame; dropped"]
    assert len(drops) == 1
    assert (drops[0].t, drops[0].event_id, drops[0].status) == ("MESSAGE_UPDATE", "2", status)  # type: ignore[attr-defined]
    assert TOKEN not in caplog.text
    assert all(TOKEN not in str(vars(r)) for r in caplog.records)


async def test_drain_delivers_everything_queued_before_returning() -> None:
    hook = FakeWebhook(expect=20)
    metrics, sleep = RelayMetrics(), RecordingSleep()
    async with serve(hook.app) as base, delivery_to(f"{base}/webhook", metrics, sleep) as d:
        for i in range(1, 21):
            await d.submit(make_frame(i, f"c{i % 4}", i))
        left = await d.drain(5)
        assert left == []
        assert len(hook.accepted) == 20  # delivered before drain returned
        with pytest.raises(DeliveryClosed):
            await d.submit(make_frame(99, "c", 99))
    assert metrics.value("relay_queue_depth") == 0


async def test_drain_deadline_logs_and_returns_frames_that_could_not_be_delivered(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async def down(frame_id: str, attempt: int) -> Response:
        return Response(status_code=503)

    hook = FakeWebhook(down)
    metrics, sleep = RelayMetrics(), RecordingSleep()
    caplog.set_level(logging.INFO, logger="app.relay")
    frames = [make_frame(1, "a", 1), make_frame(2, "a", 2), make_frame(3, "b", 3)]
    async with serve(hook.app) as base, delivery_to(f"{base}/webhook", metrics, sleep) as d:
        for frame in frames:
            await d.submit(frame)
        await sleep.until(2)
        left = await d.drain(0.2)

    assert sorted(f.event_id or "" for f in left) == ["1", "2", "3"]
    logged = [r for r in caplog.records if r.getMessage() == "frame left undelivered at shutdown"]
    assert sorted(r.event_id for r in logged) == ["1", "2", "3"]  # type: ignore[attr-defined]
    assert metrics.value("relay_frames_dropped_total", reason="shutdown") == 3
    assert hook.accepted == []
