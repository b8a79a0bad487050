"""Prompt assembly for the written reply, in seed 002's fixed order (pure).

1. the channel summary, 2. the speaker's memories, 3. the conversation oldest to newest
(human lines prefixed with their display name, bot lines as assistant turns), 4. the persona,
last. The Messages API takes system text apart from the turns, so 1, 2 and 4 become the
system blocks in that order (the persona is the last one) and 3 becomes the messages. When
the message replies to another, the message being answered (and its own reply chain) is a
system block just before the persona; what the message carries (images, a file's text) joins
its turn as content blocks.

Older messages recalled for relevance (MEMORY_RECALL=relevant) open the conversation, each
line marked with its date, and a system note before the persona says what those are."""

from __future__ import annotations

import json
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
    attachments: tuple[str, ...] = ()  # named only (e.g. "a.png (image/png, 3 KB)")
    said_at: datetime | None = None  # set on an older message recalled for relevance

    @property
    def shown(self) -> str:
        if not self.attachments:
            return self.content
        named = f"[attached: {'; '.join(self.attachments)}]"
        return f"{self.content} {named}" if self.content.strip() else named

    def text(self) -> str:
        """The line as its turn carries it: a human's with their name, dated when older."""
        said = self.shown if self.is_bot else f"{self.author_name}: {self.shown}"
        if self.said_at is None:
            return said
        return f"[{self.said_at.astimezone(UTC):%Y-%m-%d}] {said}"


@dataclass(frozen=True, slots=True)
class Quoted:
    """A message of the reply chain; ``yours``: the bot itself wrote it."""

    author_name: str
    yours: bool
    content: str
    attachments: tuple[str, ...] = ()


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
    answering: Sequence[Quoted] = (),
    attached: Sequence[dict[str, Any]] = (),
) -> Prompt:
    """``answering``: the reply chain, oldest first, ending with the message being answered;
    ``attached``: content blocks of what the newest message carries."""
    earlier = EARLIER_NOTE if any(line.said_at for line in conversation) else None
    blocks = (channel_summary, memory_block, earlier, render_answering(answering))
    system = [block for block in blocks if block]
    system.append(persona)
    return Prompt(system=system, messages=with_attached(conversation_turns(conversation), attached))


def render_answering(chain: Sequence[Quoted]) -> str | None:
    """The reply chain as one block, each message on one attributed line (its text quoted,
    so no newline or name inside it can pass for another line)."""
    if not chain:
        return None
    lines = []
    for index, quoted in enumerate(chain):
        who = f"you ({quoted.author_name})" if quoted.yours else quoted.author_name
        text = json.dumps(quoted.content, ensure_ascii=False)
        named = f" [attached: {'; '.join(quoted.attachments)}]" if quoted.attachments else ""
        mark = "the message being answered" if index == len(chain) - 1 else "earlier in the chain"
        lines.append(f"- ({mark}) {who}: {text}{named}")
    return (
        "The newest message is a reply. The message it answers, after the earlier messages "
        "it in turn replied to (oldest first):\n" + "\n".join(lines)
    )


def with_attached(
    turns: list[dict[str, Any]], attached: Sequence[dict[str, Any]]
) -> list[dict[str, Any]]:
    """What the newest message carries joins the last user turn (or a turn of its own)."""
    if not attached:
        return turns
    if turns and turns[-1]["role"] == "user":
        last = turns[-1]
        return [*turns[:-1], {"role": "user", "content": [_text(last["content"]), *attached]}]
    return [*turns, {"role": "user", "content": list(attached)}]


def _text(text: str) -> dict[str, Any]:
    return {"type": "text", "text": text}


def conversation_turns(conversation: Sequence[ChatLine]) -> list[dict[str, Any]]:
    """Alternate user/assistant turns: consecutive lines of one side merge into one turn,
    and the conversation starts with a user turn as the Messages API requires."""
    turns: list[tuple[Literal["user", "assistant"], list[str]]] = []
    for line in conversation:
        if not line.shown.strip():
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
    return [f"{line.author_name}: {line.shown}" for line in conversation[-limit:]]
