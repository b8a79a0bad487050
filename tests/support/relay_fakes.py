"""Fakes around the relay: a Discord gateway on a real websocket port and a recording webhook.

The gateway is driven step by step by a test (``next_connection``), or plays Discord on its
own (``automatic=True``): it answers IDENTIFY with READY, RESUME with the missed frames and
RESUMED, routes each event to the shard Discord would ((guild_id >> 22) % shard_count, DMs
to shard 0) and keeps each session's log so a resume replays exactly what came after it."""

from __future__ import annotations

import asyncio
import itertools
import json
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from websockets.asyncio.server import ServerConnection
from websockets.asyncio.server import serve as ws_serve
from websockets.exceptions import ConnectionClosed

from app.relay.frames import channel_key
from app.relay.gateway import GatewayTuning
from app.relay.settings import RelaySettings
from tests.support.frames import Frame, frame

BOT_TOKEN = "relay-test-bot-token"
HOOK_TOKEN = "relay-test-gateway-token-0123456789abcdef"
SESSION_HEADER = "x-discord-gateway-session"
FAST = GatewayTuning(
    hello_timeout_s=5,
    open_timeout_s=5,
    reconnect_base_s=0.01,
    reconnect_max_s=0.05,
    invalid_session_min_s=0,
    invalid_session_max_s=0.01,
    identify_interval_s=0.05,
)


class GatewayConnection:
    """One client connection to the fake gateway."""

    def __init__(self, ws: ServerConnection, *, ack: bool) -> None:
        self.ws = ws
        self.path = ws.request.path if ws.request else ""
        self.ack = ack
        self.shard: tuple[int, int] | None = None  # as the client identified
        self.inbox: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        self.heartbeats: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        self.closed = asyncio.Event()

    async def pump(self) -> None:
        try:
            async for raw in self.ws:
                payload = json.loads(raw)
                if payload["op"] == 1:
                    self.heartbeats.put_nowait(payload)
                    if self.ack:
                        await self.ws.send(json.dumps({"op": 11}))
                    continue
                if payload["op"] == 2:
                    shard = payload["d"].get("shard", [0, 1])
                    self.shard = (int(shard[0]), int(shard[1]))
                self.inbox.put_nowait(payload)
        except ConnectionClosed:
            pass
        finally:
            self.closed.set()

    async def hello(self, interval_ms: int = 250) -> None:
        await self.ws.send(json.dumps({"op": 10, "d": {"heartbeat_interval": interval_ms}}))

    async def expect(self, op: int) -> dict[str, Any]:
        payload = await asyncio.wait_for(self.inbox.get(), 5)
        assert payload["op"] == op, payload
        return payload

    async def dispatch(self, event: Frame, seq: int) -> str:
        """Send ``event`` (a frame from tests.support.frames) as dispatch number ``seq``."""
        raw = json.dumps({**event, "s": seq})
        await self.ws.send(raw)
        return raw

    async def heartbeat_with(self, seq: int) -> None:
        while (await asyncio.wait_for(self.heartbeats.get(), 5))["d"] != seq:
            pass

    async def close_code(self) -> int | None:
        await asyncio.wait_for(self.closed.wait(), 5)
        return self.ws.close_code


@dataclass
class Session:
    """A gateway session as Discord keeps it: its sequence and every dispatch it carried."""

    id: str
    shard: int
    seq: int = 0
    log: list[tuple[int, str]] = field(default_factory=list)
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)

    def next_frame(self, t: str, data: dict[str, Any]) -> str:
        self.seq += 1
        raw = json.dumps(frame(t, data, s=self.seq))
        self.log.append((self.seq, raw))
        return raw


@dataclass(frozen=True)
class Sent:
    """An event the fake sent (or will replay) on a shard's session."""

    shard: int
    session_id: str
    s: int
    raw: str


class FakeGateway:
    def __init__(self, *, automatic: bool = False) -> None:
        self.automatic = automatic
        self.connections: asyncio.Queue[GatewayConnection] = asyncio.Queue()
        self.url = ""
        self.shard_count: int | None = None
        self.sessions: dict[int, Session] = {}  # shard -> its current session
        self.live: dict[int, GatewayConnection] = {}
        self.identifies: list[tuple[float, int]] = []  # (monotonic time, shard)
        self.resumes: list[tuple[int, str, int]] = []  # (shard, session id, seq)
        self.resumes_allowed = asyncio.Event()
        self.resumes_allowed.set()
        self._changed = asyncio.Condition()
        self._session_ids = itertools.count(1)

    async def handler(self, ws: ServerConnection) -> None:
        connection = GatewayConnection(ws, ack=True)
        self.connections.put_nowait(connection)
        if not self.automatic:
            await connection.pump()
            return
        play = asyncio.create_task(self._play_discord(connection))
        try:
            await connection.pump()
        finally:
            play.cancel()
            await asyncio.gather(play, return_exceptions=True)
            async with self._changed:
                if connection.shard and self.live.get(connection.shard[0]) is connection:
                    del self.live[connection.shard[0]]
                self._changed.notify_all()

    async def next_connection(self, timeout_s: float = 5) -> GatewayConnection:
        return await asyncio.wait_for(self.connections.get(), timeout_s)

    # -- playing Discord ------------------------------------------------------------------

    async def _play_discord(self, connection: GatewayConnection) -> None:
        await connection.hello()
        first = await connection.inbox.get()
        if first["op"] == 2:
            await self._identified(connection)
        elif first["op"] == 6:
            await self.resumes_allowed.wait()
            await self._resume(connection, first["d"])

    async def _identified(self, connection: GatewayConnection) -> None:
        assert connection.shard is not None
        shard, count = connection.shard
        self.identifies.append((time.monotonic(), shard))
        if self.shard_count is None:
            self.shard_count = count
        assert count == self.shard_count, "every shard must identify with the same count"
        session = Session(f"session-{shard}-{next(self._session_ids)}", shard)
        async with session.lock:
            self.sessions[shard] = session
            ready = {"session_id": session.id, "resume_gateway_url": f"{self.url}/resume"}
            await connection.ws.send(session.next_frame("READY", ready))
            await self._set_live(shard, connection)

    async def _resume(self, connection: GatewayConnection, data: dict[str, Any]) -> None:
        session = next((s for s in self.sessions.values() if s.id == data["session_id"]), None)
        if session is None:
            await connection.ws.send(json.dumps({"op": 9, "d": False}))
            return
        connection.shard = (session.shard, self.shard_count or 1)
        self.resumes.append((session.shard, session.id, data["seq"]))
        async with session.lock:  # no event slips between the replay and going live
            for seq, raw in session.log:
                if seq > data["seq"]:
                    await connection.ws.send(raw)
            await connection.ws.send(session.next_frame("RESUMED", {}))
            await self._set_live(session.shard, connection)

    async def _set_live(self, shard: int, connection: GatewayConnection) -> None:
        async with self._changed:
            self.live[shard] = connection
            self._changed.notify_all()

    # -- what a test does -----------------------------------------------------------------

    async def until_live(self, shards: set[int], timeout_s: float = 5) -> None:
        async with self._changed:
            await asyncio.wait_for(
                self._changed.wait_for(lambda: shards <= set(self.live)), timeout_s
            )

    def shard_of(self, data: dict[str, Any]) -> int:
        """Discord's routing: (guild_id >> 22) % shard_count; DMs go to shard 0."""
        assert self.shard_count is not None, "no shard has identified yet"
        guild = data.get("guild_id")
        return 0 if guild is None else (int(guild) >> 22) % self.shard_count

    async def route(self, event: Frame) -> Sent:
        """Send an event on its shard; while that shard is down, only log it for the replay."""
        shard = self.shard_of(event["d"])
        session = self.sessions[shard]
        async with session.lock:
            raw = session.next_frame(event["t"], event["d"])
            connection = self.live.get(shard)
            if connection is not None:
                await connection.ws.send(raw)
        return Sent(shard, session.id, session.seq, raw)

    async def drop(self, shard: int, code: int = 4000) -> GatewayConnection:
        """Close a shard's connection from the server side; its session stays resumable."""
        async with self._changed:
            connection = self.live.pop(shard)
        await connection.ws.close(code=code)
        await asyncio.wait_for(connection.closed.wait(), 5)
        return connection


@asynccontextmanager
async def fake_gateway(*, automatic: bool = False) -> AsyncIterator[FakeGateway]:
    gateway = FakeGateway(automatic=automatic)
    async with ws_serve(gateway.handler, "127.0.0.1", 0) as server:
        port = next(iter(server.sockets)).getsockname()[1]
        gateway.url = f"ws://127.0.0.1:{port}"
        yield gateway


class Webhook:
    """A local /webhook that accepts everything and keeps each body and session header."""

    def __init__(self) -> None:
        self.bodies: list[bytes] = []
        self.sessions: list[str | None] = []  # the x-discord-gateway-session of each body
        self.tokens: set[str | None] = set()
        self.arrived = asyncio.Condition()
        self.app = Starlette(routes=[Route("/webhook", self.handle, methods=["POST"])])

    async def handle(self, request: Request) -> Response:
        self.tokens.add(request.headers.get("x-discord-gateway-token"))
        body = await request.body()
        async with self.arrived:
            self.bodies.append(body)
            self.sessions.append(request.headers.get(SESSION_HEADER))
            self.arrived.notify_all()
        return JSONResponse({"status": "ok"})

    async def until(self, count: int) -> None:
        async with self.arrived:
            await asyncio.wait_for(self.arrived.wait_for(lambda: len(self.bodies) >= count), 5)

    def received(self) -> list[tuple[str | None, int, bytes]]:
        """(session header, s, body) of every delivery, in arrival order."""
        return [
            (session, json.loads(body)["s"], body)
            for session, body in zip(self.sessions, self.bodies, strict=True)
        ]


def relay_settings(webhook_base: str, **overrides: Any) -> RelaySettings:
    values: dict[str, Any] = {
        "discord_bot_token": BOT_TOKEN,
        "gateway_token": HOOK_TOKEN,
        "webhook_url": f"{webhook_base}/webhook",
        "discord_api_base": "http://127.0.0.1:9/api/v10",  # nothing there: must not be asked
        "relay_retry_base_s": 0.005,
        "relay_retry_max_s": 0.02,
        "relay_drain_deadline_s": 2,
        "_env_file": None,
        **overrides,
    }
    return RelaySettings(**values)


def channel_of(body: bytes) -> str:
    """The lane a frame travels in (a thread event's is the thread's own id)."""
    return channel_key(json.loads(body)["d"])
