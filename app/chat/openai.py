"""The OpenAI-compatible adapter: our ChatRequest as a Chat Completions call over the official
``openai`` SDK (OpenAI, OpenRouter, Ollama, vLLM, llama.cpp's server, LM Studio), its answer
as our ChatAnswer.

The same failure branches as the Anthropic adapter: 429 (the SDK honours Retry-After), 5xx,
timeouts and connection errors are ChatUnavailable after the SDK's retries; other refusals and
malformed answers are ChatFailed. A server that refuses images gets them named instead (the
call is made again, and later calls name them at once); a server without tool calling raises
ToolsUnsupported, so the task agent falls back to the written reply. Each is logged once.
A server that reports no ``usage`` gets an estimate, marked as such."""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Iterator, Sequence
from dataclasses import replace
from typing import Any

import httpx2
import openai
from openai.types.chat import ChatCompletion

from app.chat.base import (
    ChatAnswer,
    ChatFailed,
    ChatRequest,
    ChatUnavailable,
    Outcome,
    Stop,
    Tool,
    ToolCall,
    ToolsUnsupported,
    Usage,
)
from app.kit.spend import estimate_tokens
from app.kit.tls import httpx2_tls

log = logging.getLogger("app.chat")

MAX_RETRIES = 2
# A local server may need no key; the SDK refuses to start without one, so this stands in.
_NO_KEY = "no-key"
# The words servers use when they refuse what a request carries (Ollama, vLLM, llama.cpp,
# LM Studio, OpenRouter): a refusal naming one of them is that capability missing.
_IMAGE_WORDS = ("image", "vision", "multimodal", "mmproj")
_TOOL_WORDS = ("tool", "function")
_STOPS = {"tool_calls": Stop.TOOL_USE, "function_call": Stop.TOOL_USE, "length": Stop.MAX_TOKENS}
IMAGE_NOT_SHOWN = "[the image is not shown: this model does not take images]"


def openai_client(
    http: httpx2.AsyncClient | None,
    *,
    timeout_s: float,
    max_retries: int = MAX_RETRIES,
    api_key: str | None = None,
    base_url: str | None = None,
) -> openai.AsyncOpenAI:
    """An SDK client with an explicit timeout and retries. Without an explicit key or base URL
    the SDK reads OPENAI_API_KEY and OPENAI_BASE_URL from the environment itself."""
    key = api_key or os.environ.get("OPENAI_API_KEY") or _NO_KEY
    if http is None:  # the SDK's own client (its limits, keep-alive), on the shared context
        http = openai.DefaultAsyncHttpxClient(verify=httpx2_tls())
    return openai.AsyncOpenAI(
        api_key=key,
        base_url=base_url or None,
        http_client=http,
        timeout=timeout_s,
        max_retries=max_retries,
    )


class OpenAIChat:
    """The ChatProvider for Chat Completions. What a server turned down (images, tools) is
    remembered for the process, so the refusal is paid for and logged once."""

    def __init__(
        self, client: openai.AsyncOpenAI, *, model: str, timeout_s: float | None = None
    ) -> None:
        self._client = client
        self._model = model
        self._timeout_s = timeout_s
        self._images = True
        self._tools = True
        # OpenAI's newer models take only ``max_completion_tokens``; most servers ``max_tokens``.
        self._limit_key = "max_tokens"

    def __repr__(self) -> str:
        return f"OpenAIChat(model={self._model!r})"

    async def complete(self, request: ChatRequest) -> ChatAnswer:
        for _ in range(4):  # each adjustment is made at most once
            if request.tools and not self._tools:
                if request.force_tool:  # structured output without tool calling
                    return await self._structured(request)
                raise ToolsUnsupported("the server calls no tools", outcome="no_tools")
            try:
                return await self._complete(request)
            except _Adjusted:
                continue
        raise ChatFailed(f"chat model refused the request ({request.purpose.value})")

    async def _structured(self, request: ChatRequest) -> ChatAnswer:
        """A forced tool call answered as JSON under the tool's schema (``response_format``),
        for a server without tool calling; the JSON must be an object, as a call's input."""
        [tool] = [t for t in request.tools if t.name == request.force_tool]
        body = self._body(replace(request, tools=(), force_tool=None))
        body["response_format"] = {
            "type": "json_schema",
            "json_schema": {"name": tool.name, "schema": tool.input_schema, "strict": True},
        }
        try:
            completion = await self._client.chat.completions.create(**body)
        except openai.OpenAIError as exc:
            raise _failure(exc, request.purpose.value) from exc
        try:
            answer = _answer(request, completion, self._images)
            call = ToolCall("structured", tool.name, _arguments(answer.text))
        except (AttributeError, IndexError, KeyError, TypeError, ValueError) as exc:
            raise ChatFailed(
                f"chat model answer malformed ({request.purpose.value})", outcome=Outcome.MALFORMED
            ) from exc
        return ChatAnswer("", (call,), Stop.TOOL_USE, answer.usage)

    async def _complete(self, request: ChatRequest) -> ChatAnswer:
        purpose = request.purpose
        try:
            completion = await self._client.chat.completions.create(**self._body(request))
        except openai.APIStatusError as exc:
            if request.tools and _names(exc, _TOOL_WORDS) and exc.status_code < 500:
                self._tools = False
                log.warning(
                    "the chat model or server calls no tools: tasks get the written reply, "
                    "decisions a JSON schema",
                    extra={"status": exc.status_code},
                )
                raise _Adjusted from exc
            if self._images and _has_images(request) and _names(exc, _IMAGE_WORDS):
                self._images = False
                log.warning("the chat model refuses images: they are named instead from now on")
                raise _Adjusted from exc
            if self._limit_key == "max_tokens" and _names(exc, ("max_completion_tokens",)):
                self._limit_key = "max_completion_tokens"
                raise _Adjusted from exc
            raise _failure(exc, purpose.value) from exc
        except openai.OpenAIError as exc:
            raise _failure(exc, purpose.value) from exc
        try:
            return _answer(request, completion, self._images)
        except (AttributeError, IndexError, KeyError, TypeError, ValueError) as exc:
            raise ChatFailed(
                f"chat model answer malformed ({purpose.value})", outcome=Outcome.MALFORMED
            ) from exc

    def _body(self, request: ChatRequest) -> dict[str, Any]:
        body: dict[str, Any] = {
            "model": request.model or self._model,
            "messages": to_messages(request.system, request.messages, images=self._images),
            self._limit_key: request.max_tokens,
        }
        if request.tools:
            body["tools"] = [_tool(t) for t in request.tools]
        if request.force_tool:
            body["tool_choice"] = {"type": "function", "function": {"name": request.force_tool}}
        if self._timeout_s is not None:
            body["timeout"] = self._timeout_s
        return body


class _Adjusted(Exception):
    """The server refused something it will never take (images, ``max_tokens``): the request
    is made again without it."""


def to_messages(
    system: Sequence[str], messages: Sequence[dict[str, Any]], *, images: bool = True
) -> list[dict[str, Any]]:
    """Pure: our request as Chat Completions messages. The system blocks are one system
    message, in order (some servers' templates take only one, and only first); tool results
    become ``tool`` messages; images become ``image_url`` data-URL parts, or a line saying they
    are not shown when the model takes none."""
    out: list[dict[str, Any]] = []
    joined = "\n\n".join(block for block in system if block)
    if joined:
        out.append({"role": "system", "content": joined})
    for message in messages:
        out.extend(_message(message, images))
    return out


def _message(message: dict[str, Any], images: bool) -> Iterator[dict[str, Any]]:
    role, content = message["role"], message["content"]
    if isinstance(content, str):
        yield {"role": role, "content": content}
        return
    if role == "assistant":
        yield _assistant(content)
        return
    for block in content:
        if block.get("type") == "tool_result":
            text = _result_text(block.get("content"))
            yield {
                "role": "tool",
                "tool_call_id": block["tool_use_id"],
                "content": f"[tool error] {text}" if block.get("is_error") else text,
            }
    parts = [_part(b, images) for b in content if b.get("type") != "tool_result"]
    if parts:
        yield {"role": role, "content": parts}


def _assistant(content: list[dict[str, Any]]) -> dict[str, Any]:
    text = "".join(b["text"] for b in content if b.get("type") == "text")
    calls = [
        {
            "id": b["id"],
            "type": "function",
            "function": {"name": b["name"], "arguments": json.dumps(b["input"])},
        }
        for b in content
        if b.get("type") == "tool_use"
    ]
    turn: dict[str, Any] = {"role": "assistant", "content": text or None}
    if calls:
        turn["tool_calls"] = calls
    return turn


def _part(block: dict[str, Any], images: bool) -> dict[str, Any]:
    if block.get("type") == "image":
        if not images:
            return {"type": "text", "text": IMAGE_NOT_SHOWN}
        source = block["source"]
        url = f"data:{source['media_type']};base64,{source['data']}"
        return {"type": "image_url", "image_url": {"url": url}}
    return {"type": "text", "text": str(block.get("text", ""))}


def _result_text(content: object) -> str:
    if isinstance(content, list):
        return "\n".join(str(b.get("text", "")) for b in content if isinstance(b, dict))
    return str(content or "")


def _tool(tool: Tool) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {
            "name": tool.name,
            "description": tool.description,
            "parameters": tool.input_schema,
        },
    }


def _answer(request: ChatRequest, completion: ChatCompletion, images: bool) -> ChatAnswer:
    choice = completion.choices[0]
    message = choice.message
    text = (message.content or "").strip()
    calls = tuple(
        ToolCall(call.id, call.function.name, _arguments(call.function.arguments))
        for call in message.tool_calls or ()
        if call.type == "function"
    )
    stop = Stop.TOOL_USE if calls else _STOPS.get(choice.finish_reason or "", Stop.END)
    return ChatAnswer(text, calls, stop, _usage(request, completion, text, calls, images))


def _arguments(raw: str) -> dict[str, Any]:
    """A tool call's arguments: a JSON object, or the answer is malformed."""
    value = json.loads(raw or "{}")
    if not isinstance(value, dict):
        raise ValueError("tool arguments are not a JSON object")
    return value


def _usage(
    request: ChatRequest,
    completion: ChatCompletion,
    text: str,
    calls: tuple[ToolCall, ...],
    images: bool,
) -> Usage:
    reported = completion.usage
    if reported is not None and reported.prompt_tokens is not None:
        return Usage(request.purpose, reported.prompt_tokens, reported.completion_tokens or 0)
    sent = json.dumps(to_messages(request.system, request.messages, images=images))
    said = text + "".join(json.dumps(c.input) for c in calls)
    return Usage(request.purpose, estimate_tokens(sent), estimate_tokens(said), estimated=True)


def _has_images(request: ChatRequest) -> bool:
    return any(
        isinstance(m["content"], list) and any(b.get("type") == "image" for b in m["content"])
        for m in request.messages
    )


def _names(exc: openai.APIStatusError, words: Sequence[str]) -> bool:
    """Whether a refusal (4xx, or a server's 500 for what it cannot take) names ``words``."""
    said = str(exc.message).lower() + " " + str(exc.body).lower()
    return any(word in said for word in words)


def _failure(exc: openai.OpenAIError, purpose: str) -> ChatFailed:
    outcome = _failure_kind(exc)
    failed = ChatUnavailable if _passing(exc) else ChatFailed
    return failed(f"chat model call failed ({purpose}): {outcome}", outcome=outcome)


def _failure_kind(exc: openai.OpenAIError) -> str:
    if isinstance(exc, openai.APITimeoutError):
        return Outcome.TIMEOUT
    if isinstance(exc, openai.APIStatusError):
        return f"status_{exc.status_code}"
    if isinstance(exc, openai.APIConnectionError):
        return Outcome.CONNECTION
    if isinstance(exc, openai.APIResponseValidationError):
        return Outcome.MALFORMED
    return Outcome.ERROR


def _passing(exc: openai.OpenAIError) -> bool:
    """An outage rather than a refusal: no answer, rate-limited, or the server failing."""
    if isinstance(exc, openai.APIConnectionError):  # timeouts included
        return True
    return isinstance(exc, openai.APIStatusError) and (
        exc.status_code == 429 or exc.status_code >= 500
    )
