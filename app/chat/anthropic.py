"""The Anthropic adapter: our ChatRequest as a Messages API call over
``anthropic.AsyncAnthropic``, its answer as our ChatAnswer (text, tool calls, usage).

Any failure (after the SDK's retries for 429/529/connection errors) is one typed error,
ChatFailed; ChatUnavailable when it was an outage that may pass. The metered client around
the adapter records usage and checks budgets."""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

import anthropic
import httpx2
from anthropic.types import MessageParam, TextBlockParam, ToolParam

from app.chat.base import (
    ChatAnswer,
    ChatFailed,
    ChatRequest,
    ChatUnavailable,
    Stop,
    Tool,
    ToolCall,
    Usage,
)
from app.config import Settings
from app.kit.tls import httpx2_tls

MAX_RETRIES = 2
# Used only so construction succeeds without a key: every call then fails with 401 → ChatFailed.
_PLACEHOLDER_KEY = "unset-anthropic-api-key"


def anthropic_client(
    http: httpx2.AsyncClient | None,
    *,
    timeout_s: float,
    max_retries: int = MAX_RETRIES,
    api_key: str | None = None,
    base_url: str | None = None,
) -> anthropic.AsyncAnthropic:
    """An SDK client with an explicit timeout and retries. Without an explicit key or base
    URL the SDK reads ANTHROPIC_API_KEY (or ANTHROPIC_AUTH_TOKEN) and ANTHROPIC_BASE_URL
    from the environment itself."""
    has_key = (
        api_key or os.environ.get("ANTHROPIC_API_KEY") or os.environ.get("ANTHROPIC_AUTH_TOKEN")
    )
    if http is None:  # the SDK's own client (its limits, keep-alive), on the shared context
        http = anthropic.DefaultAsyncHttpxClient(verify=httpx2_tls())
    return anthropic.AsyncAnthropic(
        api_key=api_key if api_key else (None if has_key else _PLACEHOLDER_KEY),
        base_url=base_url or None,
        http_client=http,
        timeout=timeout_s,
        max_retries=max_retries,
    )


def build_anthropic(
    settings: Settings, http: httpx2.AsyncClient | None = None
) -> anthropic.AsyncAnthropic:
    """The bot's client (chat and in-process decisions). ``http`` must be an ``httpx2``
    client: the SDK refuses a plain ``httpx.AsyncClient``. Values read from ``.env`` by the
    settings are passed on, since the SDK itself only sees the process environment."""
    key = settings.anthropic_api_key
    return anthropic_client(
        http,
        timeout_s=settings.chat_timeout_s,
        max_retries=MAX_RETRIES,
        api_key=key.get_secret_value() if key else None,
        base_url=settings.anthropic_base_url,
    )


class AnthropicChat:
    """The Anthropic adapter: ``system`` blocks become the Messages API system list, in
    order; our blocks are the Messages API's own."""

    def __init__(
        self, client: anthropic.AsyncAnthropic, *, model: str, timeout_s: float | None = None
    ) -> None:
        self._client = client
        self._model = model
        self._timeout_s = timeout_s

    def __repr__(self) -> str:
        return f"AnthropicChat(model={self._model!r})"

    async def complete(self, request: ChatRequest) -> ChatAnswer:
        purpose = request.purpose
        try:
            message = await self._client.messages.create(
                model=request.model or self._model,
                max_tokens=request.max_tokens,
                system=_system_blocks(request.system) or anthropic.omit,
                messages=[_turn(m) for m in request.messages],
                tools=[_tool(t) for t in request.tools] or anthropic.omit,
                tool_choice=(
                    {"type": "tool", "name": request.force_tool}
                    if request.force_tool
                    else anthropic.omit
                ),
                timeout=self._timeout_s if self._timeout_s is not None else anthropic.NOT_GIVEN,
            )
        except anthropic.AnthropicError as exc:
            outcome = _failure_kind(exc)
            failed = ChatUnavailable if _passing(exc) else ChatFailed
            raise failed(
                f"chat model call failed ({purpose.value}): {outcome}", outcome=outcome
            ) from exc
        usage = Usage(purpose, message.usage.input_tokens, message.usage.output_tokens)
        text = "".join(block.text for block in message.content if block.type == "text").strip()
        calls = tuple(
            ToolCall(block.id, block.name, block.input if isinstance(block.input, dict) else {})
            for block in message.content
            if block.type == "tool_use"
        )
        return ChatAnswer(text, calls, _STOPS.get(message.stop_reason or "", Stop.END), usage)


_STOPS = {"tool_use": Stop.TOOL_USE, "max_tokens": Stop.MAX_TOKENS}


def _tool(tool: Tool) -> ToolParam:
    return {
        "name": tool.name,
        "description": tool.description,
        "input_schema": tool.input_schema,
    }


def _system_blocks(system: Sequence[str]) -> list[TextBlockParam]:
    return [{"type": "text", "text": block} for block in system if block]


def _turn(message: dict[str, Any]) -> MessageParam:
    return {"role": message["role"], "content": message["content"]}


def _failure_kind(exc: anthropic.AnthropicError) -> str:
    if isinstance(exc, anthropic.APITimeoutError):
        return "timeout"
    if isinstance(exc, anthropic.APIStatusError):
        return f"status_{exc.status_code}"
    if isinstance(exc, anthropic.APIConnectionError):
        return "connection"
    return "error"


def _passing(exc: anthropic.AnthropicError) -> bool:
    """An outage rather than a refusal: no answer, rate-limited, or the server failing."""
    if isinstance(exc, anthropic.APIConnectionError):  # timeouts included
        return True
    return isinstance(exc, anthropic.APIStatusError) and (
        exc.status_code == 429 or exc.status_code >= 500
    )
