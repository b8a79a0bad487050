"""The chat-model boundary: one request and one answer of our own (messages, tools, images,
a purpose), adapters that speak a provider's API, and typed failures.

Messages are ``{"role": "user"|"assistant", "content": str | blocks}``; a block is
``{"type": "text", "text"}``, ``{"type": "image", "source": {"type": "base64", "media_type",
"data"}}``, ``{"type": "tool_use", "id", "name", "input"}`` or ``{"type": "tool_result",
"tool_use_id", "content", "is_error"?}``. Each adapter translates them for its API."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Protocol

from app.kit.spend import Budget


class Purpose(StrEnum):
    REPLY = "reply"
    MEMORY_TEXT = "memory_text"
    DIARY = "diary"
    EPISODE = "episode"
    STYLE = "style"
    TASK = "task"
    # A closed question (app/decision/): its tokens are recorded under the question's id.
    DECISION = "decision"


class Outcome(StrEnum):
    """How a call ended, as the metrics and the log say it (failures add ``status_<code>``)."""

    OK = "ok"
    EMPTY = "empty"
    TIMEOUT = "timeout"
    CONNECTION = "connection"
    MALFORMED = "malformed"
    OVER_BUDGET = "over_budget"
    ERROR = "error"


class ChatFailed(Exception):
    """The chat model gave no usable answer (after the SDK's own retries)."""

    def __init__(self, message: str, *, outcome: str = Outcome.ERROR) -> None:
        super().__init__(message)
        self.outcome = outcome


class ChatUnavailable(ChatFailed):
    """The model could not be reached or was overloaded (a timeout, a connection error,
    429, 5xx/529): an outage that later may pass, unlike a refused request or an empty text."""


class OverBudget(ChatFailed):
    """The payer's daily token budget is spent: no call was made."""

    def __init__(self, budget: Budget) -> None:
        super().__init__(f"daily token budget spent: {budget.value}", outcome=Outcome.OVER_BUDGET)
        self.budget = budget


class ToolsUnsupported(ChatFailed):
    """The model or server does not call tools: the caller writes without them."""


@dataclass(frozen=True, slots=True)
class Usage:
    purpose: Purpose
    input_tokens: int
    output_tokens: int
    # The server reported none: the figures are our estimate from the request and the text.
    estimated: bool = False


@dataclass(frozen=True, slots=True)
class Tool:
    name: str
    description: str
    input_schema: dict[str, Any]


@dataclass(frozen=True, slots=True)
class ToolCall:
    id: str
    name: str
    input: dict[str, Any]


class Stop(StrEnum):
    END = "end"
    TOOL_USE = "tool_use"
    MAX_TOKENS = "max_tokens"


@dataclass(frozen=True, slots=True)
class ChatRequest:
    purpose: Purpose
    system: Sequence[str]  # system blocks in order (the persona last where there is one)
    messages: Sequence[dict[str, Any]]
    max_tokens: int = 1024
    tools: Sequence[Tool] = ()
    # A tool the model must call (structured output); None: the model may answer in text.
    force_tool: str | None = None
    model: str | None = None  # None: the adapter's model for the purpose


@dataclass(frozen=True, slots=True)
class ChatAnswer:
    text: str
    tool_calls: tuple[ToolCall, ...] = ()
    stop: Stop = Stop.END
    usage: Usage = field(default_factory=lambda: Usage(Purpose.REPLY, 0, 0))

    def blocks(self) -> list[dict[str, Any]]:
        """The answer as assistant content blocks (to send back, and to store)."""
        content: list[dict[str, Any]] = []
        if self.text:
            content.append({"type": "text", "text": self.text})
        content.extend(
            {"type": "tool_use", "id": c.id, "name": c.name, "input": c.input}
            for c in self.tool_calls
        )
        return content


class ChatProvider(Protocol):
    """An adapter: one provider's API behind our request and answer. It records nothing;
    the metered client around it does."""

    async def complete(self, request: ChatRequest) -> ChatAnswer:
        """The model's answer; raise ChatFailed (ChatUnavailable for an outage that may
        pass, ToolsUnsupported for a server that calls no tools) on any failure."""
        ...


class ChatModel(Protocol):
    """What features call: every call metered and checked against the payer's budget."""

    async def complete(self, request: ChatRequest) -> ChatAnswer: ...

    async def write(
        self,
        purpose: Purpose,
        *,
        system: Sequence[str],
        messages: Sequence[dict[str, Any]],
        max_tokens: int = 1024,
        model: str | None = None,
    ) -> str:
        """Return the model's text; raise ChatFailed on any failure or empty text.

        ``system`` is a list of system blocks in order (the last one is the persona for
        replies); ``messages`` are turns as the module docstring says."""
        ...
