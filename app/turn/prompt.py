"""Prompt assembly for the written reply, in seed 002's fixed order (pure).

1. the channel summary, 2. the speaker's memories, 3. the conversation oldest to newest
(each human message one attributed line of app.kit.attribution, bot lines as assistant
turns), 4. the persona, last. The Messages API takes system text apart from the turns, so 1,
2 and 4 become the system blocks in that order (the persona is the last one) and 3 becomes
the messages, with a note just before them on how the lines read. When the message replies
to another, the message being answered (and its own reply chain) is a system block just
before the persona; what the message carries (images, a file's text) joins its turn as
content blocks.

Older messages recalled for relevance (MEMORY_RECALL=relevant) open the conversation, each
marked with its date, and the note says what those are. The decision questions and the task
path see the same lines, labelled the same way."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal

from app.kit.attribution import FORMAT, Author, Labels

REPLY_NOTE = (
    "The user turns of the conversation hold the members' messages and the assistant turns "
    f"your own earlier ones; other blocks quote messages the same way. {FORMAT} Answer as "
    "yourself, in plain text."
)
EARLIER_NOTE = (
    "The conversation opens with a few older messages of this channel, brought back because "
    'they bear on the newest message; each of those carries its "date" (YYYY-MM-DD, UTC), '
    "and your own among them start with [YYYY-MM-DD]. The undated messages that follow are "
    "the recent conversation."
)


@dataclass(frozen=True, slots=True)
class ChatLine:
    author_id: int
    author_name: str
    is_bot: bool
    content: str
    attachments: tuple[str, ...] = ()  # named only (e.g. "a.png (image/png, 3 KB)")
    said_at: datetime | None = None  # set on an older message recalled for relevance

    @property
    def empty(self) -> bool:
        return not self.content.strip() and not self.attachments

    @property
    def author(self) -> Author:
        return Author(self.author_id, self.author_name, self.is_bot)

    def line(self, labels: Labels) -> str:
        """The message as one attributed line, dated when older."""
        dated = {"date": f"{self.said_at.astimezone(UTC):%Y-%m-%d}"} if self.said_at else {}
        return labels.line(self.author_id, self.content, **dated, **_attached(self.attachments))

    def own_text(self) -> str:
        """The bot's own line as its assistant turn carries it: the text, dated when older."""
        named = f"[attached: {'; '.join(self.attachments)}]" if self.attachments else ""
        said = " ".join(part for part in (self.content.strip() and self.content, named) if part)
        if self.said_at is None:
            return said
        return f"[{self.said_at.astimezone(UTC):%Y-%m-%d}] {said}"


@dataclass(frozen=True, slots=True)
class Quoted:
    """A message of the reply chain; ``yours``: the bot itself wrote it."""

    author_id: int
    author_name: str
    yours: bool
    content: str
    attachments: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Prompt:
    system: list[str]
    messages: list[dict[str, Any]]


def _attached(names: tuple[str, ...]) -> dict[str, list[str]]:
    return {"attached": list(names)} if names else {}


def conversation_labels(
    conversation: Sequence[ChatLine], answering: Sequence[Quoted] = (), *also: Author
) -> Labels:
    """The labels of everyone one prompt shows: the reply chain, the conversation, and
    ``also`` (the newest names win)."""
    chain = (Author(q.author_id, q.author_name, q.yours) for q in answering)
    return Labels([*chain, *(line.author for line in conversation), *also])


def assemble_prompt(
    *,
    channel_summary: str | None,
    memory_block: str | None,
    conversation: Sequence[ChatLine],
    persona: str,
    answering: Sequence[Quoted] = (),
    attached: Sequence[dict[str, Any]] = (),
    labels: Labels | None = None,
) -> Prompt:
    """``answering``: the reply chain, oldest first, ending with the message being answered;
    ``attached``: content blocks of what the newest message carries; ``labels``: the
    authors' labels (by default, those of the conversation and the chain)."""
    labels = labels or conversation_labels(conversation, answering)
    earlier = EARLIER_NOTE if any(line.said_at for line in conversation) else None
    note = f"{REPLY_NOTE}\n\n{earlier}" if earlier else REPLY_NOTE
    blocks = (channel_summary, memory_block, note, render_answering(answering, labels))
    system = [block for block in blocks if block]
    system.append(persona)
    turns = conversation_turns(conversation, labels)
    return Prompt(system=system, messages=with_attached(turns, attached))


def render_answering(chain: Sequence[Quoted], labels: Labels) -> str | None:
    """The reply chain as one block, each message one attributed line."""
    if not chain:
        return None
    return (
        "The newest message is a reply. The message it answers (the last line), after the "
        "earlier messages it in turn replied to (oldest first):\n"
        + "\n".join(chain_lines(chain, labels))
    )


def chain_lines(chain: Sequence[Quoted], labels: Labels) -> list[str]:
    return [labels.line(q.author_id, q.content, **_attached(q.attachments)) for q in chain]


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


def conversation_turns(conversation: Sequence[ChatLine], labels: Labels) -> list[dict[str, Any]]:
    """Alternate user/assistant turns: consecutive lines of one side merge into one turn,
    and the conversation starts with a user turn as the Messages API requires."""
    turns: list[tuple[Literal["user", "assistant"], list[str]]] = []
    for line in conversation:
        if line.empty:
            continue
        role: Literal["user", "assistant"] = "assistant" if line.is_bot else "user"
        text = line.own_text() if line.is_bot else line.line(labels)
        if turns and turns[-1][0] == role:
            turns[-1][1].append(text)
        else:
            turns.append((role, [text]))
    while turns and turns[0][0] == "assistant":
        turns.pop(0)
    return [{"role": role, "content": "\n".join(texts)} for role, texts in turns]


TASK_LINES = 10  # seed 002: the task path reads the channel's last ten lines


def task_lines(
    conversation: Sequence[ChatLine], labels: Labels, *, limit: int = TASK_LINES
) -> list[str]:
    """The task path's and the decisions' view of the channel: its last ``limit`` messages,
    each one attributed line (the bot's too)."""
    return [line.line(labels) for line in conversation[-limit:] if not line.empty]


def task_authors(
    conversation: Sequence[ChatLine], chain: Sequence[Quoted], requester_id: int
) -> frozenset[int]:
    """Whose words the task path's request shows, so its stored turn goes with any of them:
    the requester, the authors of the lines ``task_lines`` renders, and every author of the
    reply chain it answers (however far back in the channel they wrote)."""
    shown = (line.author_id for line in conversation[-TASK_LINES:] if not line.empty)
    return frozenset({requester_id, *shown, *(quoted.author_id for quoted in chain)})


def decision_prompt(conversation: Sequence[ChatLine], said: ChatLine) -> str:
    """What the reaction and task questions read: the last eight messages and the one to
    answer. Text only: the decision model never sees an attachment, only its name."""
    recent = conversation[-8:]
    labels = conversation_labels(recent, (), said.author)
    lines = "\n".join(task_lines(recent, labels, limit=8))
    return f"{FORMAT}\n\nRecent conversation:\n{lines}\n\nMessage to answer:\n{said.line(labels)}"


def correction_prompt(bot: Author, said: str, member: Author, replied: str) -> str:
    """The correction question: the bot's message and the member's reply to it."""
    labels = Labels([bot, member])
    return (
        f"{FORMAT}\n\nThe bot's message, then the member's reply to it:\n"
        f"{labels.line(bot.id, said)}\n{labels.line(member.id, replied)}"
    )
