"""Prompt assembly for the written reply, in seed 002's fixed order (pure).

1. the channel summary, 2. the speaker's memories, 3. the conversation oldest to newest
(human lines prefixed with their display name, bot lines as assistant turns), 4. the persona,
last. The Messages API takes system text apart from the turns, so 1, 2 and 4 become the
system blocks in that order (the persona is the last one) and 3 becomes the messages.

Older messages recalled for relevance (MEMORY_RECALL=relevant) open the conversation, each
line marked with its date, and a system note before the persona says what those are."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal

EARLIER_NOTE = (
    "The conversation opens with a few older messages of this channel, brought back because "
    "they bear on the newest message; each of those lines starts with its date [YYYY-MM-DD] "
    "(UTC). The undated lines that follow are the recent conversation."
)


@dataclass(frozen=True, slots=True)
class ChatLine:
    author_name: str
    is_bot: bool
    content: str
    said_at: datetime | None = None  # set on an older message recalled for relevance

    def text(self) -> str:
        """The line as its turn carries it: a human's with their name, dated when older."""
        said = self.content if self.is_bot else f"{self.author_name}: {self.content}"
        if self.said_at is None:
            return said
        return f"[{self.said_at.astimezone(UTC):%Y-%m-%d}] {said}"


@dataclass(frozen=True, slots=True)
class Prompt:
    system: list[str]
    messages: list[dict[str, Any]]


def assemble_prompt(
    *,
    channel_summary: str | None,
    memory_block: str | None,
    conversation: Sequence[ChatLine],
    persona: str,
) -> Prompt:
    earlier = EARLIER_NOTE if any(line.said_at for line in conversation) else None
    system = [block for block in (channel_summary, memory_block, earlier) if block]
    system.append(persona)
    return Prompt(system=system, messages=conversation_turns(conversation))


def conversation_turns(conversation: Sequence[ChatLine]) -> list[dict[str, Any]]:
    """Alternate user/assistant turns: consecutive lines of one side merge into one turn,
    and the conversation starts with a user turn as the Messages API requires."""
    turns: list[tuple[Literal["user", "assistant"], list[str]]] = []
    for line in conversation:
        if not line.content.strip():
            continue
        role: Literal["user", "assistant"] = "assistant" if line.is_bot else "user"
        text = line.text()
        if turns and turns[-1][0] == role:
            turns[-1][1].append(text)
        else:
            turns.append((role, [text]))
    while turns and turns[0][0] == "assistant":
        turns.pop(0)
    return [{"role": role, "content": "\n".join(texts)} for role, texts in turns]


def task_lines(conversation: Sequence[ChatLine], *, limit: int = 10) -> list[str]:
    """The task path's view of the channel: its last ten lines as plain text."""
    return [f"{line.author_name}: {line.content}" for line in conversation[-limit:]]
