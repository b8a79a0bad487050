"""A small Discord gateway client: HELLO, heartbeats, IDENTIFY/RESUME, reconnects.

It hands every dispatch frame, with its raw text, to a callback and awaits it, so a slow
consumer slows the socket reader instead of piling frames up in memory. To shut down it first
stops reading (``stop_reading``: the frame in hand is handed on, no other is read), and only
when told (``close_sessions``), once what it read is delivered, closes with a resumable code:
1000 or 1001 would end the session on Discord's side."""

from __future__ import annotations

import asyncio
import json
import logging
import random
import sys
from collections.abc import Awaitable, Callable
from contextlib import suppress
from dataclasses import dataclass
from typing import Any

import httpx
from pydantic import SecretStr
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed, WebSocketException

from app.relay.frames import INTENTS, backoff_delay, connect_url, parse_payload
from app.relay.metrics import RelayMetrics
from app.relay.shards import IDENTIFY_INTERVAL_S

log = logging.getLogger(__name__)
# websockets logs frames (the IDENTIFY carries the token) at DEBUG: keep it quiet whatever
# the root level is.
_ws_log = logging.getLogger("app.relay.websocket")
_ws_log.setLevel(logging.INFO)

OP_DISPATCH = 0
OP_HEARTBEAT = 1
OP_IDENTIFY = 2
OP_RESUME = 6
OP_RECONNECT = 7
OP_INVALID_SESSION = 9
OP_HELLO = 10
OP_HEARTBEAT_ACK = 11

# Close codes after which reconnecting cannot help (bad token, bad intents, sharding).
FATAL_CLOSE_CODES = frozenset({4004, 4010, 4011, 4012, 4013, 4014})
# Close codes after which the session cannot be resumed: identify afresh.
SESSION_LOST_CLOSE_CODES = frozenset({4007, 4009})
# Closing with 1000/1001 ends the session on Discord's side; any other code keeps it resumable.
RESUMABLE_CLOSE = 4000


@dataclass(frozen=True, slots=True)
class Dispatch:
    """A dispatch frame as received, with the session it arrived on."""

    payload: dict[str, Any]
    raw: str | bytes
    shard: int
    session_id: str | None


OnDispatch = Callable[[Dispatch], Awaitable[None]]
# Where to open a fresh session; ``stale`` after a failed connection, so a cached answer is
# asked again.
GatewayUrl = Callable[[bool], Awaitable[str]]
# Waits until this shard may IDENTIFY (Discord's max_concurrency buckets).
IdentifyTurn = Callable[[], Awaitable[None]]
Sleep = Callable[[float], Awaitable[None]]


async def _identify_now() -> None:
    return None


class GatewayFatal(Exception):
    """The gateway refused us for a reason a reconnect cannot fix."""


class ProtocolViolation(Exception):
    """The gateway said something out of protocol (no HELLO first)."""


@dataclass(frozen=True, slots=True)
class GatewayTuning:
    hello_timeout_s: float = 20.0
    open_timeout_s: float = 20.0
    reconnect_base_s: float = 1.0
    reconnect_max_s: float = 60.0
    invalid_session_min_s: float = 1.0
    invalid_session_max_s: float = 5.0
    max_frame_bytes: int = 64 * 1024 * 1024
    identify_interval_s: float = IDENTIFY_INTERVAL_S  # per identify bucket


class GatewayClient:
    """One shard's connection: its own session id, resume URL and sequence."""

    def __init__(
        self,
        *,
        token: SecretStr,
        gateway_url: GatewayUrl,
        on_dispatch: OnDispatch,
        metrics: RelayMetrics,
        shard: tuple[int, int] = (0, 1),
        identify_turn: IdentifyTurn = _identify_now,
        intents: int = INTENTS,
        tuning: GatewayTuning | None = None,
        sleep: Sleep = asyncio.sleep,
        rand: Callable[[], float] = random.random,
    ) -> None:
        self.shard_id, self.shard_count = shard
        self._label = str(self.shard_id)
        self._identify_turn = identify_turn
        self._token = token
        self._gateway_url = gateway_url
        self._on_dispatch = on_dispatch
        self._metrics = metrics
        self._intents = intents
        self._tuning = tuning or GatewayTuning()
        self._sleep = sleep
        self._rand = rand
        self.session_id: str | None = None
        self.resume_url: str | None = None
        self.seq: int | None = None
        self._acked = True
        self._zombie = False
        self._connections = 0
        self._stopping = asyncio.Event()
        self._may_close = asyncio.Event()
        self._handed_on = asyncio.Event()  # set while no read frame waits for on_dispatch
        self._handed_on.set()

    def __repr__(self) -> str:
        return (
            f"GatewayClient(shard={self.shard_id}, session_id={self.session_id!r}, "
            f"seq={self.seq!r})"
        )

    def _log_extra(self, **fields: Any) -> dict[str, Any]:
        return {"shard": self.shard_id, **fields}

    async def stop_reading(self) -> None:
        """Read no more frames; return once the frame already read (if any) is handed on."""
        self._stopping.set()
        await self._handed_on.wait()

    def close_sessions(self) -> None:
        """After ``stop_reading``: close the connection, resumably, and end ``run``."""
        self._may_close.set()

    async def run(self) -> None:
        """Stay connected until stopped or cancelled; raises GatewayFatal when Discord refuses
        us."""
        failures = 0
        while not self._stopping.is_set():
            if self._connections:
                self._metrics.reconnects.labels(shard=self._label).inc()
            self._connections += 1
            try:
                ready = await self._connect_and_serve(stale=failures > 0)
            except (OSError, TimeoutError, WebSocketException, httpx.HTTPError) as exc:
                ready = False
                log.warning(
                    "gateway connection failed", extra=self._log_extra(error=type(exc).__name__)
                )
            except ProtocolViolation as exc:
                ready = False
                log.warning("gateway protocol violation", extra=self._log_extra(error=str(exc)))
            failures = 0 if ready else failures + 1
            if failures and not self._stopping.is_set():
                delay = backoff_delay(
                    failures - 1, self._tuning.reconnect_base_s, self._tuning.reconnect_max_s
                )
                log.info(
                    "gateway reconnect after backoff",
                    extra=self._log_extra(delay_s=round(delay, 3)),
                )
                await self._sleep(delay)

    def _can_resume(self) -> bool:
        return self.session_id is not None and self.resume_url is not None and self.seq is not None

    def _forget_session(self) -> None:
        self.session_id = self.resume_url = None
        self.seq = None

    async def _connect_and_serve(self, *, stale: bool) -> bool:
        """One connection's life; True when it reached READY or RESUMED."""
        resume = self._can_resume()
        base = self.resume_url if resume and self.resume_url else await self._gateway_url(stale)
        async with connect(
            connect_url(base),
            compression=None,
            open_timeout=self._tuning.open_timeout_s,
            max_size=self._tuning.max_frame_bytes,
            logger=_ws_log,
        ) as ws:
            try:
                return await self._serve(ws, resume=resume)
            except asyncio.CancelledError:
                # Cut off (the drain's deadline, another shard's failure): still a resumable
                # close, not the 1011 the library would send for an exception.
                await ws.close(code=RESUMABLE_CLOSE)
                raise

    async def _serve(self, ws: ClientConnection, *, resume: bool) -> bool:
        hello = parse_payload(await asyncio.wait_for(ws.recv(), self._tuning.hello_timeout_s))
        if hello is None or hello.get("op") != OP_HELLO:
            raise ProtocolViolation("the gateway did not start with HELLO")
        interval = float(hello["d"]["heartbeat_interval"]) / 1000.0
        self._acked, self._zombie = True, False
        heartbeat = asyncio.create_task(self._heartbeat(ws, interval))
        try:
            if resume:
                await ws.send(json.dumps(self._resume()))
            else:
                # Only IDENTIFY starts a session, so only it waits for the bucket's turn.
                await self._identify_turn()
                self._metrics.identifies.labels(shard=self._label).inc()
                await ws.send(json.dumps(self._identify()))
            ready = await self._read(ws)
            if self._stopping.is_set():
                await self._may_close.wait()  # until what was read is delivered
                await ws.close(code=RESUMABLE_CLOSE)
            return ready
        finally:
            heartbeat.cancel()
            with suppress(asyncio.CancelledError):
                await heartbeat

    async def _read(self, ws: ClientConnection) -> bool:
        stopping = asyncio.ensure_future(self._stopping.wait())
        try:
            return await self._read_until_stopped(ws, stopping)
        finally:
            stopping.cancel()

    async def _next_frame(
        self, ws: ClientConnection, stopping: asyncio.Future[Any]
    ) -> str | bytes | None:
        """The next frame, or None once stopping (a frame received meanwhile is returned:
        it has been read). Cancelling ``recv`` loses nothing (websockets guarantees it)."""
        if self._stopping.is_set():
            return None
        receiving = asyncio.ensure_future(ws.recv())
        await asyncio.wait({receiving, stopping}, return_when=asyncio.FIRST_COMPLETED)
        if not receiving.done():
            receiving.cancel()
        try:
            return await receiving
        except asyncio.CancelledError:
            return None

    async def _read_until_stopped(
        self, ws: ClientConnection, stopping: asyncio.Future[Any]
    ) -> bool:
        ready = False
        while True:
            try:
                raw = await self._next_frame(ws, stopping)
            except ConnectionClosed as exc:
                if not self._zombie:
                    self._on_closed(exc)
                return ready
            if raw is None:
                return ready
            payload = parse_payload(raw)
            if payload is None:
                log.warning("gateway sent a frame that is not a JSON object; skipped")
                continue
            op = payload.get("op")
            if op == OP_DISPATCH:
                ready = self._on_session_event(payload) or ready
                self._handed_on.clear()
                try:
                    await self._on_dispatch(Dispatch(payload, raw, self.shard_id, self.session_id))
                finally:
                    self._handed_on.set()
                if isinstance(payload.get("s"), int):
                    self.seq = payload["s"]
            elif op == OP_HEARTBEAT:
                await ws.send(json.dumps({"op": OP_HEARTBEAT, "d": self.seq}))
            elif op == OP_HEARTBEAT_ACK:
                self._acked = True
            elif op == OP_RECONNECT:
                log.info("gateway asked us to reconnect", extra=self._log_extra())
                await ws.close(code=RESUMABLE_CLOSE)
                return ready
            elif op == OP_INVALID_SESSION:
                await self._invalid_session(ws, resumable=payload.get("d") is True)
                return ready

    def _on_session_event(self, payload: dict[str, Any]) -> bool:
        t, data = payload.get("t"), payload.get("d")
        if t == "READY" and isinstance(data, dict):
            self.session_id = data.get("session_id")
            self.resume_url = data.get("resume_gateway_url")
            log.info("gateway session ready", extra=self._log_extra(session_id=self.session_id))
            return True
        if t == "RESUMED":
            log.info("gateway session resumed", extra=self._log_extra(seq=self.seq))
            return True
        return False

    async def _invalid_session(self, ws: ClientConnection, *, resumable: bool) -> None:
        log.info("gateway session invalidated", extra=self._log_extra(resumable=resumable))
        if not resumable:
            self._forget_session()
        await ws.close(code=RESUMABLE_CLOSE)
        low, high = self._tuning.invalid_session_min_s, self._tuning.invalid_session_max_s
        await self._sleep(low + (high - low) * self._rand())

    def _on_closed(self, exc: ConnectionClosed) -> None:
        code = exc.rcvd.code if exc.rcvd is not None else None
        log.info("gateway closed the connection", extra=self._log_extra(code=code))
        if code in FATAL_CLOSE_CODES:
            raise GatewayFatal(f"the gateway closed with code {code}; not reconnecting")
        if code in SESSION_LOST_CLOSE_CODES:
            self._forget_session()

    async def _heartbeat(self, ws: ClientConnection, interval: float) -> None:
        # The first beat is jittered so many clients restarting together do not beat together.
        await self._sleep(interval * self._rand())
        try:
            while True:
                if not self._acked:
                    log.warning(
                        "gateway heartbeat not acknowledged; reconnecting", extra=self._log_extra()
                    )
                    self._zombie = True
                    await ws.close(code=RESUMABLE_CLOSE)
                    return
                self._acked = False
                await ws.send(json.dumps({"op": OP_HEARTBEAT, "d": self.seq}))
                await self._sleep(interval)
        except ConnectionClosed:
            return

    def _identify(self) -> dict[str, Any]:
        return {
            "op": OP_IDENTIFY,
            "d": {
                "token": self._token.get_secret_value(),
                "intents": self._intents,
                "shard": [self.shard_id, self.shard_count],
                "properties": {"os": sys.platform, "browser": "relay", "device": "relay"},
            },
        }

    def _resume(self) -> dict[str, Any]:
        return {
            "op": OP_RESUME,
            "d": {
                "token": self._token.get_secret_value(),
                "session_id": self.session_id,
                "seq": self.seq,
            },
        }
