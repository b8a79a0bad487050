"""The whole relay against a local fake Discord gateway, a fake REST API and a local webhook."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import signal
import sys
from pathlib import Path

import httpx
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from app.relay.frames import (
    DIRECT_MESSAGE_REACTIONS,
    DIRECT_MESSAGES,
    GUILD_MESSAGE_REACTIONS,
    GUILD_MESSAGES,
    GUILDS,
    HANDLED_TYPES,
    MESSAGE_CONTENT,
)
from app.relay.gateway import GatewayFatal
from app.relay.metrics import RelayMetrics
from app.relay.service import run_relay
from tests.support.frames import (
    Frame,
    frame,
    interaction_create,
    message_create,
    message_delete,
    message_delete_bulk,
    message_update,
    reaction_add,
    reaction_remove,
    reaction_remove_all,
    reaction_remove_emoji,
    thread_create,
)
from tests.support.relay_fakes import (
    BOT_TOKEN,
    FAST,
    HOOK_TOKEN,
    Webhook,
    channel_of,
    fake_gateway,
    relay_settings,
)
from tests.support.servers import free_port, serve
from tests.support.waiting import wait_until

REPO_ROOT = Path(__file__).resolve().parents[2]
RELAY_ENV_PREFIXES = ("DATABASE_URL", "DISCORD_", "GATEWAY_TOKEN", "WEBHOOK_URL", "RELAY_", "LOG_")
REQUIRED_INTENTS = (
    GUILDS
    | GUILD_MESSAGES
    | GUILD_MESSAGE_REACTIONS
    | DIRECT_MESSAGES
    | DIRECT_MESSAGE_REACTIONS
    | MESSAGE_CONTENT
)


def said(message_id: int, channel: int = 10) -> Frame:
    """A message in a guild channel (10 unless said), its text non-ASCII: bytes must pass."""
    return message_create(content=f"msg {message_id} ✓", message_id=message_id, channel_id=channel)


async def test_relay_forwards_handled_frames_verbatim_and_resumes_after_op7() -> None:
    rest_calls: list[str | None] = []

    webhook = Webhook()
    metrics = RelayMetrics()
    stop = asyncio.Event()
    async with fake_gateway() as gateway, serve(webhook.app) as hook_base:

        async def gateway_bot(request: Request) -> Response:
            rest_calls.append(request.headers.get("authorization"))
            return JSONResponse({"url": gateway.url, "shards": 1})

        rest = Starlette(routes=[Route("/api/v10/gateway/bot", gateway_bot)])
        async with serve(rest) as rest_base:
            settings = relay_settings(hook_base, discord_api_base=f"{rest_base}/api/v10")
            relay = asyncio.create_task(run_relay(settings, metrics, stop, tuning=FAST))

            first = await gateway.next_connection()
            assert first.path.startswith("/?") and "encoding=json" in first.path
            assert "compress" not in first.path  # plain JSON text frames
            await first.hello()
            identify = await first.expect(2)
            assert identify["d"]["token"] == BOT_TOKEN
            assert identify["d"]["intents"] & REQUIRED_INTENTS == REQUIRED_INTENTS
            resume_url = f"{gateway.url}/resume"
            await first.dispatch(
                frame("READY", {"session_id": "s-1", "resume_gateway_url": resume_url}), 1
            )
            sent = [
                await first.dispatch(frame("GUILD_CREATE", {"id": "1", "channels": []}), 2),
                await first.dispatch(said(100), 3),
                await first.dispatch(
                    frame("TYPING_START", {"channel_id": "10", "user_id": "7"}), 4
                ),
                await first.dispatch(reaction_add(message_id=100, user_id=7, channel_id=10), 5),
                await first.dispatch(
                    message_update(message_id=100, channel_id=10, content="edited"), 6
                ),
            ]
            await webhook.until(3)
            await first.heartbeat_with(6)  # the heartbeat carries the last sequence number
            await first.ws.send(json.dumps({"op": 7, "d": None}))
            assert await first.close_code() == 4000  # not 1000: the session stays resumable

            second = await gateway.next_connection()
            assert second.path.startswith("/resume")
            await second.hello()
            resume = await second.expect(6)
            assert resume["d"] == {"token": BOT_TOKEN, "session_id": "s-1", "seq": 6}
            sent += [
                await second.dispatch(frame("RESUMED", {}), 7),
                await second.dispatch(reaction_remove(message_id=100, user_id=7, channel_id=10), 8),
                await second.dispatch(
                    reaction_remove_emoji(message_id=100, emoji="👍", channel_id=10), 9
                ),
                await second.dispatch(reaction_remove_all(message_id=100, channel_id=10), 10),
                await second.dispatch(message_delete(message_id=100, channel_id=10), 11),
                await second.dispatch(frame("PRESENCE_UPDATE", {"user": {"id": "7"}}), 12),
                await second.dispatch(message_delete_bulk(message_ids=[1, 2], channel_id=20), 13),
                await second.dispatch(said(200, channel=20), 14),
                # Thread events come with the GUILDS intent, in the thread's own lane.
                await second.dispatch(thread_create(thread_id=30, parent_id=20), 15),
                await second.dispatch(
                    thread_create(thread_id=30, parent_id=20, t="THREAD_UPDATE"), 16
                ),
                # A slash command: interactions come without any intent.
                await second.dispatch(interaction_create(channel_id=20), 17),
            ]
            await webhook.until(12)
            stop.set()
            assert await asyncio.wait_for(relay, 5) == []

    handled = [raw.encode() for raw in sent if json.loads(raw)["t"] in HANDLED_TYPES]
    assert sorted(webhook.bodies) == sorted(handled)  # byte for byte, each once
    for channel in ("10", "20"):
        assert [b for b in webhook.bodies if channel_of(b) == channel] == [
            b for b in handled if channel_of(b) == channel
        ]
    assert {json.loads(b)["t"] for b in webhook.bodies} == HANDLED_TYPES
    assert webhook.tokens == {HOOK_TOKEN}
    assert set(webhook.sessions) == {"s-1"}  # before and after the resume
    assert rest_calls == [f"Bot {BOT_TOKEN}"]  # asked once; the resume used resume_gateway_url
    assert metrics.value("relay_gateway_reconnects_total", shard="0") == 1
    assert metrics.value("relay_frames_received_total", shard="0", t="TYPING_START") == 1
    assert metrics.value("relay_frames_forwarded_total") == 12


async def test_every_frame_carries_its_gateway_session_kept_by_resume_renewed_by_identify() -> None:
    webhook = Webhook()
    stop = asyncio.Event()
    async with fake_gateway() as gateway, serve(webhook.app) as hook_base:
        settings = relay_settings(hook_base, discord_gateway_url=gateway.url)
        relay = asyncio.create_task(run_relay(settings, RelayMetrics(), stop, tuning=FAST))

        first = await gateway.next_connection()
        await first.hello()
        await first.expect(2)
        resume_url = f"{gateway.url}/resume"
        await first.dispatch(
            frame("READY", {"session_id": "sess-A", "resume_gateway_url": resume_url}), 1
        )
        await first.dispatch(reaction_add(message_id=100, user_id=7, channel_id=10), 2)
        await first.dispatch(said(101), 3)
        await webhook.until(2)
        await first.ws.close(code=4000)  # resumable

        second = await gateway.next_connection()
        await second.hello()
        assert (await second.expect(6))["d"]["seq"] == 3
        await second.dispatch(frame("RESUMED", {}), 4)
        await second.dispatch(reaction_remove(message_id=100, user_id=7, channel_id=10), 5)
        await webhook.until(3)
        await second.ws.send(json.dumps({"op": 9, "d": False}))  # session gone: identify anew

        third = await gateway.next_connection()
        await third.hello()
        await third.expect(2)
        await third.dispatch(
            frame("READY", {"session_id": "sess-B", "resume_gateway_url": resume_url}), 1
        )
        await third.dispatch(reaction_add(message_id=100, user_id=7, channel_id=10), 2)
        await webhook.until(4)
        stop.set()
        assert await asyncio.wait_for(relay, 5) == []

    # One channel, one lane: arrival order is gateway order.
    assert [(session, s) for session, s, _ in webhook.received()] == [
        ("sess-A", 2),
        ("sess-A", 3),
        ("sess-A", 5),  # the resumed session keeps its id: a replay repeats (session, s)
        ("sess-B", 2),  # a new session: the same s is a different event
    ]


async def test_unacknowledged_heartbeat_reconnects_and_resumes() -> None:
    webhook = Webhook()
    metrics = RelayMetrics()
    stop = asyncio.Event()
    async with fake_gateway() as gateway, serve(webhook.app) as hook_base:
        settings = relay_settings(hook_base, discord_gateway_url=gateway.url)
        relay = asyncio.create_task(run_relay(settings, metrics, stop, tuning=FAST))

        first = await gateway.next_connection()
        await first.hello(interval_ms=100)
        await first.expect(2)
        await first.dispatch(
            frame("READY", {"session_id": "s-z", "resume_gateway_url": gateway.url}), 1
        )
        await first.dispatch(said(1), 2)
        await webhook.until(1)
        first.ack = False  # a zombie connection from now on: beats go unanswered
        assert await first.close_code() == 4000

        second = await gateway.next_connection()
        await second.hello()
        resume = await second.expect(6)
        assert (resume["d"]["session_id"], resume["d"]["seq"]) == ("s-z", 2)
        await second.dispatch(frame("RESUMED", {}), 3)
        await second.dispatch(said(2), 4)
        await webhook.until(2)
        stop.set()
        assert await asyncio.wait_for(relay, 5) == []
    assert [json.loads(b)["d"]["id"] for b in webhook.bodies] == ["1", "2"]
    assert metrics.value("relay_gateway_reconnects_total", shard="0") == 1


async def test_dropped_connection_resumes_and_invalid_session_identifies_afresh() -> None:
    webhook = Webhook()
    stop = asyncio.Event()
    async with fake_gateway() as gateway, serve(webhook.app) as hook_base:
        settings = relay_settings(hook_base, discord_gateway_url=gateway.url)
        relay = asyncio.create_task(run_relay(settings, RelayMetrics(), stop, tuning=FAST))

        first = await gateway.next_connection()
        await first.hello()
        await first.expect(2)
        resume_url = f"{gateway.url}/resume"
        await first.dispatch(
            frame("READY", {"session_id": "s-1", "resume_gateway_url": resume_url}), 1
        )
        await first.ws.close(code=1011)  # the server goes away mid-session

        second = await gateway.next_connection()
        assert second.path.startswith("/resume")
        await second.hello()
        assert (await second.expect(6))["d"]["session_id"] == "s-1"
        await second.ws.send(json.dumps({"op": 9, "d": False}))  # too late to resume

        third = await gateway.next_connection()
        assert not third.path.startswith("/resume")  # back to the gateway URL
        await third.hello()
        identify = await third.expect(2)
        assert identify["d"]["token"] == BOT_TOKEN
        await third.dispatch(
            frame("READY", {"session_id": "s-2", "resume_gateway_url": resume_url}), 1
        )
        await third.dispatch(said(5), 2)
        await webhook.until(1)
        stop.set()
        assert await asyncio.wait_for(relay, 5) == []


async def test_authentication_failure_stops_the_relay_without_leaking_the_token() -> None:
    webhook = Webhook()
    async with fake_gateway() as gateway, serve(webhook.app) as hook_base:
        settings = relay_settings(hook_base, discord_gateway_url=gateway.url)
        relay = asyncio.create_task(run_relay(settings, RelayMetrics(), asyncio.Event()))

        first = await gateway.next_connection()
        await first.hello()
        await first.expect(2)
        await first.ws.close(code=4004, reason="Authentication failed.")
        with pytest.raises(GatewayFatal) as failure:
            await asyncio.wait_for(relay, 5)
    assert "4004" in str(failure.value)
    assert BOT_TOKEN not in str(failure.value)


async def test_at_stop_every_frame_read_is_delivered_before_a_resumable_close(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="app.relay")
    release = asyncio.Event()
    bodies: list[bytes] = []
    open_at_delivery: list[bool] = []  # was the gateway connection still open then?
    first = None

    async def slow_hook(request: Request) -> Response:
        await release.wait()
        bodies.append(await request.body())
        open_at_delivery.append(first is not None and not first.closed.is_set())
        return JSONResponse({"status": "ok"})

    stop = asyncio.Event()
    app = Starlette(routes=[Route("/webhook", slow_hook, methods=["POST"])])
    async with fake_gateway() as gateway, serve(app) as hook_base:
        settings = relay_settings(hook_base, discord_gateway_url=gateway.url)
        metrics = RelayMetrics()
        relay = asyncio.create_task(run_relay(settings, metrics, stop, tuning=FAST))
        first = await gateway.next_connection()
        await first.hello()
        await first.expect(2)
        await first.dispatch(
            frame("READY", {"session_id": "s", "resume_gateway_url": gateway.url}), 1
        )
        for seq in range(2, 6):
            await first.dispatch(said(seq), seq)
        await first.heartbeat_with(5)  # all four frames are read (and queued)
        stop.set()
        await wait_until(
            lambda: "relay stopping; draining" in caplog.messages, within=5, what="the drain"
        )
        assert not first.closed.is_set()  # the webhook holds every frame: the session waits
        release.set()
        # Not 1000 or 1001, which would end the session on Discord's side.
        assert await first.close_code() == 4000
        assert await asyncio.wait_for(relay, 5) == []
    assert [json.loads(b)["d"]["id"] for b in bodies] == ["2", "3", "4", "5"]
    assert open_at_delivery == [True] * 4  # delivered first, closed after
    assert metrics.value("relay_queue_depth") == 0


async def test_python_m_app_relay_runs_without_a_database_and_drains_on_sigterm(
    tmp_path: Path,
) -> None:
    webhook = Webhook()
    metrics_port = free_port()
    async with fake_gateway() as gateway, serve(webhook.app) as hook_base:
        env = {k: v for k, v in os.environ.items() if not k.startswith(RELAY_ENV_PREFIXES)}
        env |= {
            "PYTHONPATH": str(REPO_ROOT),
            "DISCORD_BOT_TOKEN": BOT_TOKEN,
            "GATEWAY_TOKEN": HOOK_TOKEN,
            "WEBHOOK_URL": f"{hook_base}/webhook",
            "DISCORD_GATEWAY_URL": gateway.url,
            "RELAY_METRICS_PORT": str(metrics_port),
        }
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "app.relay",
            cwd=tmp_path,  # no .env there, and no DATABASE_URL in env
            env=env,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        try:
            first = await gateway.next_connection(timeout_s=9)
            await first.hello()
            assert (await first.expect(2))["d"]["token"] == BOT_TOKEN
            await first.dispatch(
                frame("READY", {"session_id": "s", "resume_gateway_url": gateway.url}), 1
            )
            raw = await first.dispatch(said(42), 2)
            await webhook.until(1)
            async with httpx.AsyncClient(timeout=5) as http:
                exposition = (await http.get(f"http://127.0.0.1:{metrics_port}/metrics")).text
            assert "relay_frames_forwarded_total 1.0" in exposition
            process.send_signal(signal.SIGTERM)
            assert await first.close_code() == 4000  # resumable: not 1000/1001
            out, err = await asyncio.wait_for(process.communicate(), 9)
        finally:
            if process.returncode is None:
                process.kill()
                await process.wait()
    assert process.returncode == 0, err.decode()
    assert webhook.bodies == [raw.encode()]
    lines = [json.loads(line) for line in out.decode().splitlines() if line.strip()]
    assert any(line["event"] == "relay stopped" for line in lines)
    assert BOT_TOKEN not in out.decode() + err.decode()
    assert HOOK_TOKEN not in out.decode() + err.decode()
