"""A local fake of an OpenAI-compatible Chat Completions server, for tests, benchmarks and
offline development, beside FakeAnthropic and answering from the same scripts.

It speaks the real wire format (``POST /v1/chat/completions``, ``tool_calls``, ``image_url``
parts, ``usage``, OpenAI's error bodies and ``Retry-After``), and can play a server without
tool calling (vLLM without ``--enable-auto-tool-choice``, an Ollama model without tools), a
model without images (llama.cpp without a projector) or a server that reports no usage.
Point the SDK at ``{url}/v1``.

``wire`` holds each request as sent; ``requests`` holds the same requests read back into the
Messages API's shape (system blocks, content blocks, ``tools`` with ``input_schema``), so one
test can read what either fake was asked."""

from __future__ import annotations

import asyncio
import itertools
import json
from collections import deque
from collections.abc import Awaitable
from dataclasses import dataclass, field
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, PlainTextResponse, Response

from app.chat.fake import Delay, Failure, Reply, Responder, Text, ToolUse, count_tokens

NO_TOOLS = '"auto" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be set'
NO_IMAGES = "image input is not supported - hint: you may need to provide the mmproj"
_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "invalid_request_error",
    404: "invalid_request_error",
    429: "rate_limit_exceeded",
    500: "server_error",
    503: "server_error",
}


@dataclass(frozen=True)
class Malformed:
    """A 200 whose body is not a chat completion."""

    body: str = '{"object": "chat.completion", "choices": "not a list"}'


OpenAIReply = Reply | Malformed


@dataclass
class FakeOpenAI:
    """Scripted replies first, in order; then ``responder``; then ``default``."""

    script: deque[OpenAIReply] = field(default_factory=deque)
    responder: Responder | None = None
    default: OpenAIReply = field(default_factory=lambda: Text("ok"))
    tools: bool = True  # False: a request with tools is refused with 400, as vLLM does
    images: bool = True  # False: a request with images is refused with 400, as llama.cpp does
    usage: bool = True  # False: answers carry no usage
    requests: list[dict[str, Any]] = field(default_factory=list)
    wire: list[dict[str, Any]] = field(default_factory=list)
    served: list[tuple[int, int]] = field(default_factory=list)
    _ids: itertools.count[int] = field(default_factory=itertools.count)

    def push(self, *replies: OpenAIReply) -> None:
        self.script.extend(replies)

    @property
    def app(self) -> FastAPI:
        app = FastAPI()

        @app.post("/v1/chat/completions")
        async def completions(request: Request) -> Response:
            body: dict[str, Any] = await request.json()
            self.wire.append(body)
            if body.get("tools") and not self.tools:
                return _error(Failure(400), NO_TOOLS)
            if not self.images and _has_images(body):
                return _error(Failure(400), NO_IMAGES)
            view = messages_view(body)
            self.requests.append(view)
            return await self._answer(view, await self._next(view))

        return app

    async def _next(self, view: dict[str, Any]) -> OpenAIReply:
        if self.script:
            return self.script.popleft()
        if self.responder is not None:
            reply = self.responder(view)
            return await reply if isinstance(reply, Awaitable) else reply
        return self.default

    async def _answer(self, view: dict[str, Any], reply: OpenAIReply) -> Response:
        if isinstance(reply, Delay):
            await asyncio.sleep(reply.seconds)
            reply = reply.then
        if isinstance(reply, Failure):
            return _error(reply)
        if isinstance(reply, Malformed):
            return PlainTextResponse(reply.body, media_type="application/json")
        n = next(self._ids)
        message: dict[str, Any] = {"role": "assistant", "content": reply.text or None}
        if isinstance(reply, ToolUse):
            message["tool_calls"] = [
                {
                    "id": f"call_{n:04d}",
                    "type": "function",
                    "function": {"name": reply.name, "arguments": json.dumps(reply.input)},
                }
            ]
        prompt, completion = count_tokens(view), 7
        self.served.append((prompt, completion) if self.usage else (0, 0))
        answer: dict[str, Any] = {
            "id": f"chatcmpl-{n:04d}",
            "object": "chat.completion",
            "created": 1_700_000_000 + n,
            "model": view.get("model", "fake"),
            "choices": [
                {
                    "index": 0,
                    "message": message,
                    "finish_reason": "tool_calls" if isinstance(reply, ToolUse) else "stop",
                }
            ],
        }
        if self.usage:
            answer["usage"] = {
                "prompt_tokens": prompt,
                "completion_tokens": completion,
                "total_tokens": prompt + completion,
            }
        return JSONResponse(answer)


def messages_view(body: dict[str, Any]) -> dict[str, Any]:
    """Pure: a Chat Completions request read back into the Messages API's shape."""
    system = [m["content"] for m in body["messages"] if m["role"] == "system"]
    messages: list[dict[str, Any]] = []
    for m in body["messages"]:
        if m["role"] == "system":
            continue
        if m["role"] == "tool":
            result = {"type": "tool_result", "tool_use_id": m["tool_call_id"]}
            result["content"] = m["content"]
            if messages and messages[-1]["role"] == "user" and _results(messages[-1]):
                messages[-1]["content"].append(result)
            else:
                messages.append({"role": "user", "content": [result]})
        elif m["role"] == "assistant":
            messages.append({"role": "assistant", "content": _assistant_blocks(m)})
        elif isinstance(m["content"], str):
            messages.append({"role": m["role"], "content": m["content"]})
        else:
            messages.append({"role": m["role"], "content": [_block(p) for p in m["content"]]})
    view: dict[str, Any] = {
        "model": body.get("model"),
        "max_tokens": body.get("max_tokens", body.get("max_completion_tokens")),
        "system": [{"type": "text", "text": text} for text in system],
        "messages": messages,
    }
    if body.get("tools"):
        view["tools"] = [
            {
                "name": t["function"]["name"],
                "description": t["function"].get("description", ""),
                "input_schema": t["function"].get("parameters", {}),
            }
            for t in body["tools"]
        ]
    if body.get("tool_choice"):
        view["tool_choice"] = body["tool_choice"]
    return view


def _results(message: dict[str, Any]) -> bool:
    content = message["content"]
    return isinstance(content, list) and all(b["type"] == "tool_result" for b in content)


def _assistant_blocks(message: dict[str, Any]) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = []
    if message.get("content"):
        blocks.append({"type": "text", "text": message["content"]})
    for call in message.get("tool_calls") or []:
        function = call["function"]
        blocks.append(
            {
                "type": "tool_use",
                "id": call["id"],
                "name": function["name"],
                "input": json.loads(function["arguments"]),
            }
        )
    return blocks


def _block(part: dict[str, Any]) -> dict[str, Any]:
    if part["type"] == "image_url":
        head, _, data = part["image_url"]["url"].partition(",")
        media_type = head.removeprefix("data:").removesuffix(";base64")
        return {
            "type": "image",
            "source": {"type": "base64", "media_type": media_type, "data": data},
        }
    return {"type": "text", "text": part.get("text", "")}


def _has_images(body: dict[str, Any]) -> bool:
    return any(
        isinstance(m.get("content"), list)
        and any(p.get("type") == "image_url" for p in m["content"])
        for m in body["messages"]
    )


def _error(failure: Failure, message: str | None = None) -> JSONResponse:
    kind = _ERROR_TYPES.get(failure.status, "server_error")
    headers = {"retry-after": str(failure.retry_after)} if failure.retry_after is not None else {}
    error = {"message": message or kind.replace("_", " "), "type": kind, "param": None}
    error["code"] = None
    return JSONResponse({"error": error}, status_code=failure.status, headers=headers)
