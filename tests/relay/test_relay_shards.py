"""Sharding: settings, identify buckets, and shards against a fake gateway routing like Discord."""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from app.relay.frames import HANDLED_TYPES
from app.relay.gateway import GatewayFatal
from app.relay.metrics import RelayMetrics
from app.relay.service import run_relay
from app.relay.settings import RelaySettingsError, load_relay_settings
from app.relay.shards import (
    AUTO,
    GatewayBot,
    IdentifyLimiter,
    ShardPlan,
    parse_gateway_bot,
    parse_shard_count,
    parse_shard_ids,
    plan_shards,
)
from tests.support.frames import frame, message_create, reaction_add
from tests.support.relay_fakes import (
    BOT_TOKEN,
    FAST,
    FakeGateway,
    Sent,
    Webhook,
    fake_gateway,
    relay_settings,
)
from tests.support.servers import free_port, serve

GOOD_TOKEN = "k3J9-q2Lr_7vXw0Zt5Nb8Yc1Hd4Mf6Pa"
# Guild snowflakes: (id >> 22) % 2 puts the even k on shard 0 and the odd k on shard 1.
GUILDS = [(k << 22) | 7 for k in range(1000, 1006)]


# -- settings ------------------------------------------------------------------------------


@pytest.fixture
def relay_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> pytest.MonkeyPatch:
    """The relay's required variables, in a directory without a .env."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("DISCORD_BOT_TOKEN", "bot-token")
    monkeypatch.setenv("GATEWAY_TOKEN", GOOD_TOKEN)
    return monkeypatch


@pytest.mark.parametrize(
    ("text", "count"), [("auto", AUTO), (" AUTO ", AUTO), ("", AUTO), ("3", 3)]
)
def test_shard_count_is_a_positive_integer_or_auto(text: str, count: object) -> None:
    assert parse_shard_count(text) == count


@pytest.mark.parametrize("text", ["0", "-1", "1.5", "two", "true"])
def test_a_shard_count_that_is_not_a_positive_integer_is_refused(text: str) -> None:
    with pytest.raises(ValueError, match="positive integer or auto"):
        parse_shard_count(text)


def test_shard_ids_are_distinct_ids_within_an_explicit_count() -> None:
    assert parse_shard_ids("0, 2", 3) == (0, 2)
    assert parse_shard_ids("1", 2) == (1,)
    with pytest.raises(ValueError, match="twice"):
        parse_shard_ids("1,1", 2)
    with pytest.raises(ValueError, match=r"outside 0\.\.1"):
        parse_shard_ids("0,2", 2)
    with pytest.raises(ValueError, match="comma-separated"):
        parse_shard_ids("0;1", 2)
    with pytest.raises(ValueError, match="comma-separated"):
        parse_shard_ids("-1", 2)
    with pytest.raises(ValueError, match="explicit RELAY_SHARD_COUNT"):
        parse_shard_ids("0", AUTO)


@pytest.mark.parametrize(
    ("count", "ids", "named"),
    [
        ("0", "", "RELAY_SHARD_COUNT"),
        ("2", "0,2", "RELAY_SHARD_IDS"),
        ("2", "1,1", "RELAY_SHARD_IDS"),
        ("auto", "0", "RELAY_SHARD_IDS"),
    ],
)
def test_bad_shard_settings_refuse_to_load_naming_the_variable(
    count: str, ids: str, named: str, relay_env: pytest.MonkeyPatch
) -> None:
    monkeypatch = relay_env
    monkeypatch.setenv("RELAY_SHARD_COUNT", count)
    monkeypatch.setenv("RELAY_SHARD_IDS", ids)
    with pytest.raises(RelaySettingsError) as failure:
        load_relay_settings()
    assert str(failure.value).startswith(f"invalid configuration: {named} ")


def test_shard_settings_default_to_auto_and_every_shard(relay_env: pytest.MonkeyPatch) -> None:
    monkeypatch = relay_env
    monkeypatch.delenv("RELAY_SHARD_COUNT", raising=False)
    monkeypatch.setenv("RELAY_SHARD_IDS", "")  # compose passes unset as empty
    settings = load_relay_settings()
    assert (settings.relay_shard_count, settings.shard_ids) == (AUTO, None)
    monkeypatch.setenv("RELAY_SHARD_COUNT", "4")
    monkeypatch.setenv("RELAY_SHARD_IDS", "3,1")
    settings = load_relay_settings()
    assert (settings.relay_shard_count, settings.shard_ids) == (4, (3, 1))


@pytest.mark.parametrize(("pod", "shard"), [("companion-relay-0", 0), ("relay-2", 2)])
def test_a_statefulset_pod_holds_the_shard_of_its_ordinal(
    pod: str, shard: int, relay_env: pytest.MonkeyPatch
) -> None:
    relay_env.setenv("RELAY_SHARD_COUNT", "3")
    relay_env.setenv("RELAY_POD_NAME", pod)
    assert load_relay_settings().shard_ids == (shard,)


@pytest.mark.parametrize(
    ("count", "ids", "pod", "says"),
    [
        ("3", "", "relay-3", "is ordinal 3, outside 0..2"),
        ("auto", "", "relay-0", "needs an explicit RELAY_SHARD_COUNT"),
        ("3", "1", "relay-0", "and RELAY_SHARD_IDS both name the shards"),
        ("3", "", "relay", "must end in -<ordinal>"),
    ],
)
def test_a_pod_name_that_cannot_name_a_shard_is_refused(
    count: str, ids: str, pod: str, says: str, relay_env: pytest.MonkeyPatch
) -> None:
    relay_env.setenv("RELAY_SHARD_COUNT", count)
    relay_env.setenv("RELAY_SHARD_IDS", ids)
    relay_env.setenv("RELAY_POD_NAME", pod)
    with pytest.raises(RelaySettingsError) as failure:
        load_relay_settings()
    assert str(failure.value).startswith(f"invalid configuration: RELAY_POD_NAME {says}")


# -- GET /gateway/bot and the plan ----------------------------------------------------------


def test_gateway_bot_answer_gives_url_shards_and_identify_concurrency() -> None:
    body = {
        "url": "wss://gateway.discord.gg",
        "shards": 9,
        "session_start_limit": {
            "total": 1000,
            "remaining": 999,
            "reset_after": 14400000,
            "max_concurrency": 16,
        },
    }
    assert parse_gateway_bot(body) == GatewayBot("wss://gateway.discord.gg", 9, 16, 999)
    assert parse_gateway_bot({"url": "wss://g", "shards": 0, "session_start_limit": []}) == (
        GatewayBot("wss://g", 1, 1, None)
    )
    bads: list[object] = [[], {"shards": 2}, {"url": ""}]
    for bad in bads:
        with pytest.raises(ValueError):
            parse_gateway_bot(bad)


def test_auto_takes_discords_count_and_a_process_holds_every_shard_unless_told() -> None:
    bot = GatewayBot("wss://g", shards=3, max_concurrency=2)
    assert plan_shards(AUTO, None, bot) == ShardPlan(3, (0, 1, 2), 2)
    assert plan_shards(4, (1, 3), bot) == ShardPlan(4, (1, 3), 2)
    # DISCORD_GATEWAY_URL set: nothing was asked, so one shard, identifying one at a time.
    assert plan_shards(AUTO, None, None) == ShardPlan(1, (0,), 1)
    assert plan_shards(2, (1,), None) == ShardPlan(2, (1,), 1)


# -- the identify limiter ------------------------------------------------------------------


class FakeClock:
    """Time that passes only when the limiter sleeps."""

    def __init__(self) -> None:
        self.now = 0.0
        self.sleeps: list[float] = []

    def __call__(self) -> float:
        return self.now

    async def sleep(self, delay: float) -> None:
        self.sleeps.append(delay)
        self.now += delay


async def test_each_identify_bucket_identifies_once_per_interval_independently() -> None:
    clock = FakeClock()
    limiter = IdentifyLimiter(2, 5.0, clock=clock, sleep=clock.sleep)
    granted: list[tuple[int, float]] = []
    for shard in range(6):  # buckets 0,1,0,1,0,1
        await limiter.wait_turn(shard)
        granted.append((shard, clock.now))
    assert granted == [(0, 0), (1, 0), (2, 5), (3, 5), (4, 10), (5, 10)]
    assert clock.sleeps == [5, 5]  # bucket 1 never waited for bucket 0's turns


async def test_with_max_concurrency_one_every_identify_waits_its_turn() -> None:
    clock = FakeClock()
    limiter = IdentifyLimiter(1, 5.0, clock=clock, sleep=clock.sleep)
    await asyncio.gather(*(limiter.wait_turn(shard) for shard in range(3)))
    assert clock.sleeps == [5, 5]
    clock.now += 60  # long after: no wait
    await limiter.wait_turn(1)
    assert clock.sleeps == [5, 5]


# -- shards end to end ---------------------------------------------------------------------


def gateway_bot_api(gateway: FakeGateway, *, shards: int, max_concurrency: int) -> Starlette:
    async def gateway_bot(request: Request) -> Response:
        limit = {"total": 1000, "remaining": 990, "reset_after": 1, "max_concurrency": 1}
        limit["max_concurrency"] = max_concurrency
        return JSONResponse({"url": gateway.url, "shards": shards, "session_start_limit": limit})

    return Starlette(routes=[Route("/api/v10/gateway/bot", gateway_bot)])


@asynccontextmanager
async def relay_running(settings: Any, metrics: RelayMetrics, **kwargs: Any) -> AsyncIterator[None]:
    stop = asyncio.Event()
    relay = asyncio.create_task(run_relay(settings, metrics, stop, **kwargs))
    try:
        yield
    finally:
        stop.set()
        assert await asyncio.wait_for(relay, 5) == []


async def send_mix(gateway: FakeGateway, first_id: int) -> list[Sent]:
    """Messages and reactions in every guild (both shards), a DM, and one unhandled event."""
    sent = []
    for n, guild in enumerate(GUILDS):
        channel, mid = guild + 1, first_id + n
        said = message_create(
            content=f"msg {mid}", message_id=mid, channel_id=channel, guild_id=guild
        )
        sent.append(await gateway.route(said))
        reacted = reaction_add(message_id=mid, user_id=7, channel_id=channel, guild_id=guild)
        sent.append(await gateway.route(reacted))
    dm = message_create(content="psst", message_id=first_id + 99, channel_id=555, guild_id=None)
    sent.append(await gateway.route(dm))
    sent.append(await gateway.route(frame("TYPING_START", {"channel_id": "555", "user_id": "7"})))
    return sent


def forwarded(sent: list[Sent]) -> list[Sent]:
    return [s for s in sent if json.loads(s.raw)["t"] in HANDLED_TYPES]


def assert_each_delivered_once_from_its_shard(webhook: Webhook, sent: list[Sent]) -> None:
    expected = Counter((s.session_id, s.s, s.raw.encode()) for s in forwarded(sent))
    assert Counter(webhook.received()) == expected
    assert max(expected.values()) == 1


async def test_two_shards_deliver_each_event_once_and_a_dropped_shard_resumes_alone() -> None:
    webhook, metrics = Webhook(), RelayMetrics()
    # Two buckets, so both shards identify at once; a 60 s interval means any IDENTIFY or
    # RESUME made to wait for a bucket's turn would blow every 5 s wait below.
    tuning = replace(FAST, identify_interval_s=60)
    async with (
        fake_gateway(automatic=True) as gateway,
        serve(webhook.app) as hook_base,
        serve(gateway_bot_api(gateway, shards=2, max_concurrency=2)) as rest_base,
    ):
        settings = relay_settings(hook_base, discord_api_base=f"{rest_base}/api/v10")
        async with relay_running(settings, metrics, tuning=tuning):
            await gateway.until_live({0, 1})
            shard0 = gateway.live[0]
            assert {gateway.live[0].shard, gateway.live[1].shard} == {(0, 2), (1, 2)}
            sent = await send_mix(gateway, 1000)
            assert {s.shard for s in sent} == {0, 1}
            assert all(s.shard == 0 for s in sent if "guild_id" not in json.loads(s.raw)["d"])
            await webhook.until(len(forwarded(sent)))
            assert_each_delivered_once_from_its_shard(webhook, sent)

            # Shard 1's connection drops; Discord holds its resume until we say so.
            gateway.resumes_allowed.clear()
            last_seq_on_shard1 = gateway.sessions[1].seq
            await gateway.drop(1, code=4000)
            during = await send_mix(gateway, 2000)  # shard 1's part waits in its session
            on_shard0 = [s for s in forwarded(during) if s.shard == 0]
            await webhook.until(len(forwarded(sent)) + len(on_shard0))
            assert gateway.live.get(0) is shard0  # shard 0 undisturbed, still delivering

            gateway.resumes_allowed.set()
            await gateway.until_live({0, 1})
            after = await send_mix(gateway, 3000)
            everything = sent + during + after
            await webhook.until(len(forwarded(everything)))

    assert_each_delivered_once_from_its_shard(webhook, everything)
    assert gateway.resumes == [(1, gateway.sessions[1].id, last_seq_on_shard1)]
    assert sorted(shard for _, shard in gateway.identifies) == [0, 1]  # no fresh session
    assert gateway.live == {}
    assert metrics.value("relay_gateway_reconnects_total", shard="1") == 1
    assert metrics.value("relay_gateway_reconnects_total", shard="0") == 0
    assert metrics.value("relay_gateway_identifies_total", shard="0") == 1
    assert metrics.value("relay_gateway_identifies_total", shard="1") == 1
    typing_per_shard = [
        metrics.value("relay_frames_received_total", shard=str(n), t="TYPING_START") for n in (0, 1)
    ]
    assert typing_per_shard == [3, 0]  # a DM-channel event: shard 0, all three rounds


async def test_shards_in_one_identify_bucket_identify_an_interval_apart() -> None:
    webhook, metrics = Webhook(), RelayMetrics()
    tuning = replace(FAST, identify_interval_s=0.4)
    async with (
        fake_gateway(automatic=True) as gateway,
        serve(webhook.app) as hook_base,
        serve(gateway_bot_api(gateway, shards=2, max_concurrency=1)) as rest_base,
    ):
        settings = relay_settings(hook_base, discord_api_base=f"{rest_base}/api/v10")
        async with relay_running(settings, metrics, tuning=tuning):
            await gateway.until_live({0, 1})
    (first_at, _), (second_at, _) = gateway.identifies
    # The limiter spaces the turns by 0.4 s; allow for the frames' trip through the loop.
    assert second_at - first_at >= 0.3


async def test_two_processes_split_the_shards_and_together_deliver_everything_once() -> None:
    webhook = Webhook()
    metrics = [RelayMetrics(), RelayMetrics()]
    async with fake_gateway(automatic=True) as gateway, serve(webhook.app) as hook_base:
        # As docker-compose.yml runs relay-0 and relay-1: one explicit count, disjoint ids.
        settings = [
            relay_settings(
                hook_base,
                discord_gateway_url=gateway.url,
                relay_shard_count=2,
                relay_shard_ids=str(n),
            )
            for n in (0, 1)
        ]
        async with (
            relay_running(settings[0], metrics[0], tuning=FAST),
            relay_running(settings[1], metrics[1], tuning=FAST),
        ):
            await gateway.until_live({0, 1})
            sent = await send_mix(gateway, 1000)
            await webhook.until(len(forwarded(sent)))

    assert_each_delivered_once_from_its_shard(webhook, sent)
    assert sorted(shard for _, shard in gateway.identifies) == [0, 1]
    for n in (0, 1):
        mine = sum(1 for s in forwarded(sent) if s.shard == n and "MESSAGE_CREATE" in s.raw)
        assert metrics[n].value(
            "relay_frames_received_total", shard=str(n), t="MESSAGE_CREATE"
        ) == (mine)
        assert metrics[n].value("relay_frames_received_total", shard=str(n), t="READY") == 1
        assert metrics[n].value("relay_frames_received_total", shard=str(1 - n), t="READY") == 0


async def test_gateway_bot_failures_are_retried_and_a_dead_cached_url_is_asked_again() -> None:
    dead = f"ws://127.0.0.1:{free_port()}"  # nothing listens there
    calls: list[str | None] = []

    async with fake_gateway(automatic=True) as gateway:
        answers: list[Response] = [
            Response(status_code=503),
            Response(b"<html>not json</html>", media_type="text/html"),
            JSONResponse({"url": dead, "shards": 1}),
            JSONResponse({"url": gateway.url, "shards": 1}),
        ]

        async def gateway_bot(request: Request) -> Response:
            calls.append(request.headers.get("authorization"))
            return answers.pop(0)

        api = Starlette(routes=[Route("/api/v10/gateway/bot", gateway_bot)])
        webhook = Webhook()
        async with serve(webhook.app) as hook_base, serve(api) as rest_base:
            settings = relay_settings(hook_base, discord_api_base=f"{rest_base}/api/v10")
            async with relay_running(settings, RelayMetrics(), tuning=FAST):
                await gateway.until_live({0})
    assert calls == [f"Bot {BOT_TOKEN}"] * 4
    assert answers == []


async def test_a_refused_bot_token_at_get_gateway_bot_stops_the_relay_without_the_token() -> None:
    async def refuse(request: Request) -> Response:
        return JSONResponse({"message": "401: Unauthorized"}, status_code=401)

    api = Starlette(routes=[Route("/api/v10/gateway/bot", refuse)])
    webhook = Webhook()
    async with serve(webhook.app) as hook_base, serve(api) as rest_base:
        settings = relay_settings(hook_base, discord_api_base=f"{rest_base}/api/v10")
        with pytest.raises(GatewayFatal) as failure:
            await asyncio.wait_for(run_relay(settings, RelayMetrics(), asyncio.Event()), 5)
    assert "401" in str(failure.value)
    assert BOT_TOKEN not in str(failure.value)
