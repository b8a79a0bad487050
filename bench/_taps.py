"""ASGI taps for the fakes: when each request arrived and finished, with its body, so a
benchmark can time the turn's steps from the outside without touching the code under test."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

Scope = dict[str, Any]
Message = dict[str, Any]
Receive = Callable[[], Any]
Send = Callable[[Message], Any]


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
