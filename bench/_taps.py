"""ASGI taps for the fakes: when each request arrived and finished, with its body, so a
benchmark can time the turn's steps from the outside without touching the code under test."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

Scope = dict[str, Any]
Message = dict[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]


@dataclass
class Hit:
    method: str
    path: str
    arrived: float  # time.monotonic() when the request reached the fake
    body: bytes = b""
    finished: float | None = None  # when the fake had answered

    def json(self) -> Any:
        try:
            return json.loads(self.body)
        except ValueError:
            return None

    def mentions(self, marker: str) -> bool:
        return marker.encode() in self.body


class Tap:
    """Wraps an ASGI app; records every HTTP request and wakes anyone waiting on a hit."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.hits: list[Hit] = []
        self._changed = asyncio.Condition()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        hit = Hit(scope["method"], scope["path"], time.monotonic())
        self.hits.append(hit)

        async def tapped() -> Message:
            message: Message = await receive()
            if message["type"] == "http.request":
                hit.body += message.get("body", b"")
            return message

        try:
            await self.app(scope, tapped, send)
        finally:
            hit.finished = time.monotonic()
            async with self._changed:
                self._changed.notify_all()

    async def wait_for(self, match: Callable[[Hit], bool]) -> Hit:
        """The first hit matching ``match``, once the fake has answered it."""

        def found() -> Hit | None:
            for hit in self.hits:
                if hit.finished is not None and match(hit):
                    return hit
            return None

        async with self._changed:
            await self._changed.wait_for(lambda: found() is not None)
        hit = found()
        assert hit is not None
        return hit


class Delayed:
    """Wraps an ASGI app: every HTTP request is answered ``seconds`` later than the app would
    (a fixed latency, e.g. Discord's)."""

    def __init__(self, app: Any, seconds: float) -> None:
        self.app, self.seconds = app, seconds

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and self.seconds > 0:
            await asyncio.sleep(self.seconds)
        await self.app(scope, receive, send)


class Watch:
    """Wraps an ASGI app: hands every HTTP request (method, path, body, arrival) to
    ``seen`` as it arrives, before the app answers. Unlike ``Tap`` it keeps nothing and
    wakes nobody: the caller indexes what it needs, so thousands of requests stay cheap."""

    def __init__(self, app: Any, seen: Callable[[str, str, bytes, float], None]) -> None:
        self.app, self.seen = app, seen

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        arrived = time.monotonic()
        chunks: list[bytes] = []
        while True:
            message: Message = await receive()
            chunks.append(message.get("body", b""))
            if not message.get("more_body"):
                break
        body = b"".join(chunks)
        self.seen(scope["method"], scope["path"], body, arrived)
        sent = False

        async def replay() -> Message:
            nonlocal sent
            if not sent:
                sent = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        await self.app(scope, replay, send)
