"""The chat-model boundary: open text only, one typed failure (and its passing kind)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Protocol


class Purpose(StrEnum):
    REPLY = "reply"
    MEMORY_TEXT = "memory_text"
    DIARY = "diary"
    EPISODE = "episode"
    STYLE = "style"
    TASK = "task"


class ChatFailed(Exception):
    """The chat model gave no usable text (after the SDK's own retries)."""


class ChatUnavailable(ChatFailed):
    """The model could not be reached or was overloaded (a timeout, a connection error,
    429, 5xx/529): an outage that later may pass, unlike a refused request or an empty text."""


@dataclass(frozen=True, slots=True)
class Usage:
    purpose: Purpose
    input_tokens: int
    output_tokens: int


class ChatModel(Protocol):
    async def write(
        self,
        purpose: Purpose,
        *,
        system: Sequence[str],
        messages: Sequence[dict[str, Any]],
        max_tokens: int = 1024,
    ) -> str:
        """Return the model's text; raise ChatFailed on any failure or empty text.

        ``system`` is a list of system blocks in order (the last one is the persona for
        replies); ``messages`` are Messages API turns (``{"role", "content"}``)."""
        ...
