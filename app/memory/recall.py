"""Recall for the reply prompt: the named people's memories, one logged read per person,
rendered as a single system block. Nobody else's memories are ever loaded.

With MEMORY_RECALL=recent each person's ten newest come back (seed 000); with `relevant`,
the ten most relevant to the query (the message and the lines just before it), each shown
with its date so "when did I…" can be answered."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime

from sqlalchemy.ext.asyncio import AsyncSession

from app.channel.exchange import Exchange, Line, Place
from app.kit.relevance import Query
from app.memory import store
from app.memory.records import MemoryRecord, Why
from app.vocabulary import Actor

# The query: the message itself counts fully, the few lines before it (what "it" refers to)
# at a quarter. bench/recall.py chose the weight on its tuning half.
CONTEXT_LINES = 3
CONTEXT_WEIGHT = 0.25


def recall_query(
    message: str, earlier: Sequence[str], *, context_weight: float = CONTEXT_WEIGHT
) -> Query:
    """Pure: what a reply's recall ranks by — ``message``, and the last few ``earlier``
    lines of the conversation (oldest first) before it, at ``context_weight``."""
    last = earlier[max(0, len(earlier) - CONTEXT_LINES) :]
    return Query.of([(message, 1.0), *((text, context_weight) for text in last)])


def exchange_query(exchange: Exchange) -> Query:
    """Pure: what the write path's read ranks by — the speaker's own lines fully, the other
    lines of the exchange (the bot's reply, other people) at CONTEXT_WEIGHT."""

    def weight(line: Line) -> float:
        own = line.author_id == exchange.speaker_id and not line.is_bot
        return 1.0 if own else CONTEXT_WEIGHT

    return Query.of((line.content, weight(line)) for line in exchange.lines)


async def recall_for_prompt(
    session: AsyncSession,
    *,
    user_ids: Sequence[int],
    place: Place,
    actor: Actor = Actor.REPLY,
    limit: int = store.RECENT_LIMIT,
    trigger: str | None = None,
    query: Query | None = None,
) -> list[MemoryRecord]:
    """Up to ``limit`` memories per user that may surface in ``place``, grouped in
    ``user_ids`` order: in a guild only what was learned in that guild, in a DM the owner's
    memories from anywhere. The newest (``query`` None), or the most relevant to ``query``.

    Each read is logged (committed by the caller), even one that finds nothing."""
    people = list(dict.fromkeys(user_ids))  # each person once, order kept
    await store.lock_owners(session, people)
    recalled: list[MemoryRecord] = []
    why = Why(actor, "recall", trigger=trigger)
    for user_id in people:
        if query is None:
            recalled += await store.recent(session, user_id, why, limit=limit, place=place)
        else:
            recalled += await store.relevant(
                session, user_id, why, query=query, limit=limit, place=place
            )
    return recalled


def day(moment: datetime | None) -> str:
    """A date as the prompt shows it (UTC)."""
    return moment.astimezone(UTC).strftime("%Y-%m-%d") if moment is not None else "undated"


def _dated(memory: MemoryRecord) -> str:
    learned, changed = day(memory.created_at), day(memory.updated_at)
    when = learned if learned == changed else f"{learned}, updated {changed}"
    return f"- [{when}] {memory.content}"


def render_memory_block(
    memories: Sequence[MemoryRecord], names: Mapping[int, str], *, dated: bool = False
) -> str | None:
    """The one system block the reply prompt carries, or None when there is nothing.
    ``dated``: each note shows when it was learned (and last updated)."""
    if not memories:
        return None
    sections: list[str] = []
    for user_id in dict.fromkeys(m.user_id for m in memories):
        name = names.get(user_id) or f"user {user_id}"
        mine = [m for m in memories if m.user_id == user_id]
        facts = "\n".join(_dated(m) if dated else f"- {m.content}" for m in mine)
        sections.append(f"About {name}:\n{facts}")
    when = " Each note shows the date you learned it (UTC)." if dated else ""
    return (
        "What you remember from earlier conversations (notes that may be out of date; "
        f"use them naturally, do not recite them):{when}\n\n" + "\n\n".join(sections)
    )
