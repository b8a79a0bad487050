"""A local fake of the Anthropic Messages API, for tests, benchmarks and offline development.

It speaks the real wire format (``POST /v1/messages``, content blocks, usage, error bodies),
records every request, and answers from a script of replies or from a responder function.
Point the SDK at it with ``base_url``."""

from __future__ import annotations

import asyncio
import itertools
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    404: "not_found_error",
    429: "rate_limit_error",
    500: "api_error",
    529: "overloaded_error",
}


@dataclass(frozen=True)
class Text:
    text: str


@dataclass(frozen=True)
class ToolUse:
    name: str
    input: dict[str, Any]
    text: str = ""


@dataclass(frozen=True)
class Failure:
    status: int
    retry_after: float | None = None


@dataclass(frozen=True)
class Delay:
    seconds: float
    then: Text | ToolUse | Failure


Reply = Text | ToolUse | Failure | Delay
Responder = Callable[[dict[str, Any]], Reply | Awaitable[Reply]]


@dataclass
class FakeAnthropic:
    """Scripted replies are used first, in order; then ``responder``; then ``default``."""

    script: deque[Reply] = field(default_factory=deque)
    responder: Responder | None = None
    default: Reply = field(default_factory=lambda: Text("ok"))
    requests: list[dict[str, Any]] = field(default_factory=list)
    # The usage each answered request reported, in order: (input tokens, output tokens).
    served: list[tuple[int, int]] = field(default_factory=list)
    _ids: itertools.count[int] = field(default_factory=itertools.count)

    def push(self, *replies: Reply) -> None:
        self.script.extend(replies)

    @property
    def app(self) -> FastAPI:
        app = FastAPI()

        @app.post("/v1/messages")
        async def messages(request: Request) -> JSONResponse:
            body: dict[str, Any] = await request.json()
            self.requests.append(body)
            return await self._answer(body, await self._next(body))

        return app

    async def _next(self, body: dict[str, Any]) -> Reply:
        if self.script:
            return self.script.popleft()
        if self.responder is not None:
            reply = self.responder(body)
            return await reply if isinstance(reply, Awaitable) else reply
        return self.default

    async def _answer(self, body: dict[str, Any], reply: Reply) -> JSONResponse:
        if isinstance(reply, Delay):
            await asyncio.sleep(reply.seconds)
            reply = reply.then
        if isinstance(reply, Failure):
            return _error(reply)
        n = next(self._ids)
        usage = {"input_tokens": count_tokens(body), "output_tokens": 7}
        self.served.append((usage["input_tokens"], usage["output_tokens"]))
        content: list[dict[str, Any]] = []
        if reply.text:
            content.append({"type": "text", "text": reply.text})
        if isinstance(reply, ToolUse):
            content.append(
                {
                    "type": "tool_use",
                    "id": f"toolu_{n:04d}",
                    "name": reply.name,
                    "input": reply.input,
                }
            )
        return JSONResponse(
            {
                "id": f"msg_{n:04d}",
                "type": "message",
                "role": "assistant",
                "model": body.get("model", "fake"),
                "content": content,
                "stop_reason": "tool_use" if isinstance(reply, ToolUse) else "end_turn",
                "stop_sequence": None,
                "usage": usage,
            }
        )


def _error(failure: Failure) -> JSONResponse:
    kind = _ERROR_TYPES.get(failure.status, "api_error")
    headers = {"retry-after": str(failure.retry_after)} if failure.retry_after is not None else {}
    return JSONResponse(
        {"type": "error", "error": {"type": kind, "message": kind.replace("_", " ")}},
        status_code=failure.status,
        headers=headers,
    )


def count_tokens(body: dict[str, Any]) -> int:
    """A rough, deterministic stand-in for the real token count (four characters a token)."""
    return max(1, len(str(body.get("system", ""))) // 4 + len(str(body.get("messages", ""))) // 4)
