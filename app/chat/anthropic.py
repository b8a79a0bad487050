"""The chat model: a thin wrapper over ``anthropic.AsyncAnthropic`` for open text.

Any failure (after the SDK's retries for 429/529/connection errors) or an empty text is one
typed error, ChatFailed; ChatUnavailable when it was an outage that may pass. Usage is
recorded per call with its purpose."""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from typing import Any

import anthropic
import httpx2
from anthropic.types import MessageParam, TextBlockParam

from app.chat.base import ChatFailed, ChatUnavailable, Purpose, Usage
from app.chat.usage import EMPTY, OK, record_failure, record_usage
from app.config import Settings

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
    """The ChatModel: ``system`` blocks become the Messages API system list, in order."""

    def __init__(
        self, client: anthropic.AsyncAnthropic, *, model: str, timeout_s: float | None = None
    ) -> None:
        self._client = client
        self._model = model
        self._timeout_s = timeout_s

    def __repr__(self) -> str:
        return f"AnthropicChat(model={self._model!r})"

    async def write(
        self,
        purpose: Purpose,
        *,
        system: Sequence[str],
        messages: Sequence[dict[str, Any]],
        max_tokens: int = 1024,
    ) -> str:
        started = time.perf_counter()
        try:
            message = await self._client.messages.create(
                model=self._model,
                max_tokens=max_tokens,
                system=_system_blocks(system) or anthropic.omit,
                messages=[_turn(m) for m in messages],
                timeout=self._timeout_s if self._timeout_s is not None else anthropic.NOT_GIVEN,
            )
        except anthropic.AnthropicError as exc:
            outcome = _failure_kind(exc)
            record_failure(purpose, outcome=outcome, latency_ms=_ms_since(started))
            failed = ChatUnavailable if _passing(exc) else ChatFailed
            raise failed(f"chat model call failed ({purpose.value}): {outcome}") from exc
        usage = Usage(purpose, message.usage.input_tokens, message.usage.output_tokens)
        text = "".join(block.text for block in message.content if block.type == "text").strip()
        record_usage(usage, outcome=OK if text else EMPTY, latency_ms=_ms_since(started))
        if not text:
            raise ChatFailed(f"chat model returned no text ({purpose.value})")
        return text


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


def _ms_since(started: float) -> float:
    return (time.perf_counter() - started) * 1000
