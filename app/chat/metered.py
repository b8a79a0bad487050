"""The one client every chat-model call goes through, whatever its purpose or provider: it
checks the payer's daily budget before the call and records the call's usage after it (by
purpose, person and guild, for the usage rows, ``!bot usage`` and GET /usage)."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any, Protocol

from app.chat.base import (
    ChatAnswer,
    ChatFailed,
    ChatProvider,
    ChatRequest,
    Outcome,
    OverBudget,
    Purpose,
)
from app.chat.usage import record_failure, record_refusal, record_usage
from app.kit.spend import Budget


class BudgetGate(Protocol):
    async def spent(self) -> Budget | None:
        """The budget the current payer has used up today, or None."""
        ...


# The work nobody waits on: it runs on MEMORY_MODEL when one is set.
BACKGROUND = frozenset({Purpose.MEMORY_TEXT, Purpose.EPISODE, Purpose.DIARY, Purpose.STYLE})


@dataclass(frozen=True, slots=True)
class Models:
    """Which model a request that names none gets: CHAT_MODEL, or MEMORY_MODEL for the
    background purposes. None: the adapter's own."""

    chat: str | None = None
    background: str | None = None

    def of(self, purpose: Purpose) -> str | None:
        return self.background if purpose in BACKGROUND else self.chat


class MeteredChat:
    """The ChatModel: ``provider`` is an adapter (Anthropic, OpenAI-compatible); ``gate``
    None means no budget is checked (no caps, or a bare test)."""

    def __init__(
        self,
        provider: ChatProvider,
        *,
        gate: BudgetGate | None = None,
        models: Models | None = None,
    ) -> None:
        self._provider = provider
        self._gate = gate
        self._models = models or Models()

    def __repr__(self) -> str:
        return f"MeteredChat({self._provider!r})"

    async def complete(self, request: ChatRequest) -> ChatAnswer:
        if self._gate is not None and (budget := await self._gate.spent()) is not None:
            record_refusal(request.purpose)
            raise OverBudget(budget)
        if request.model is None:
            request = replace(request, model=self._models.of(request.purpose))
        started = time.perf_counter()
        try:
            answer = await self._provider.complete(request)
        except ChatFailed as exc:
            record_failure(request.purpose, outcome=exc.outcome, latency_ms=_ms_since(started))
            raise
        answered = answer.text or answer.tool_calls
        outcome = Outcome.OK if answered else Outcome.EMPTY
        record_usage(answer.usage, outcome=outcome, latency_ms=_ms_since(started))
        return answer

    async def write(
        self,
        purpose: Purpose,
        *,
        system: Sequence[str],
        messages: Sequence[dict[str, Any]],
        max_tokens: int = 1024,
        model: str | None = None,
    ) -> str:
        request = ChatRequest(purpose, system, messages, max_tokens=max_tokens, model=model)
        answer = await self.complete(request)
        if not answer.text:
            raise ChatFailed(f"chat model returned no text ({purpose.value})", outcome="empty")
        return answer.text


def _ms_since(started: float) -> float:
    return (time.perf_counter() - started) * 1000
