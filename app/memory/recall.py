"""Recall for the reply prompt (MEM-04, seed 002 step 10) and the write path's read: pinned
facts (global and this channel), the named people's memories, one logged read per person,
rendered as a single system block, and the channel's recent episodes as its summary. Nobody
else's memories are ever loaded.

With MEMORY_RECALL=recent each person's ten newest come back (seed 000); with `relevant`,
the ten most relevant to the query (the message and the lines just before it), each shown
with its date so "when did I…" can be answered."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from sqlalchemy.ext.asyncio import AsyncSession

from app.channel.exchange import Exchange, Line, Place
from app.config import RecallScope, Settings
from app.episodes.store import recent_episodes
from app.kit.relevance import Query
from app.kit.vectors import Embedding
from app.memory import store
from app.memory.records import MemoryRecord, Why, turn_trigger
from app.pins.store import pinned_facts
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
    meaning: Embedding | None = None,
) -> list[MemoryRecord]:
    """Up to ``limit`` memories per user that may surface in ``place``, grouped in
    ``user_ids`` order: in a guild only what was learned in that guild, in a DM the owner's
    memories from anywhere. The newest (``query`` None), or the most relevant to ``query``
    (by meaning too, given its vector).

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
                session, user_id, why, query=query, limit=limit, place=place, meaning=meaning
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


# --- MEM-04: the reply prompt's memory part ------------------------------------------------

SUMMARY_EPISODES = 3
# Participants beyond the speaker, in the order given (the lead passes newest author first):
# a busy channel must not pull twenty people's memories into one prompt.
MAX_PARTICIPANTS = 8


@dataclass(frozen=True, slots=True)
class PromptMemory:
    channel_summary: str | None
    memory_block: str | None
    owners: frozenset[int] = frozenset()  # whose memories the block holds


def recall_user_ids(
    scope: RecallScope,
    *,
    speaker_id: int,
    participant_ids: Sequence[int],
    bot_user_id: int | None,
) -> list[int]:
    """Pure: whose memories the prompt may hold — the speaker first, then participants."""
    if scope is not RecallScope.PARTICIPANTS:
        return [speaker_id]
    others = [p for p in dict.fromkeys(participant_ids) if p not in (speaker_id, bot_user_id)][
        :MAX_PARTICIPANTS
    ]
    return [speaker_id, *others]


async def prompt_memory(
    session: AsyncSession,
    settings: Settings,
    *,
    channel_id: int,
    place: Place,
    speaker_id: int,
    names: Mapping[int, str],
    participant_ids: Sequence[int],
    parent_channel_id: int | None = None,
    event_id: str | None = None,
    query: Query | None = None,
    meaning: Embedding | None = None,
) -> PromptMemory:
    """Read (and log, in the caller's transaction) what the reply prompt may remember:
    each person's newest memories, or with ``query`` (MEMORY_RECALL=relevant) the most
    relevant to it (and with its vector, ``meaning``, by meaning too), dated.

    Memory off (MEM-10) means no memory at all: nothing is read, pins and episodes included,
    and the reply is written as it would be without the memory system. In a guild only what
    was learned in that guild surfaces (for every participant); a DM is the speaker's own
    space, where their memories from anywhere may surface, and nobody else's. A thread
    (``parent_channel_id``) shows its parent channel's pins before its own."""
    if not settings.memory_active:
        return PromptMemory(None, None)
    user_ids = recall_user_ids(
        settings.memory_recall_scope,
        speaker_id=speaker_id,
        participant_ids=[] if place.is_dm else participant_ids,
        bot_user_id=settings.discord_bot_user_id,
    )
    pins = await pinned_facts(session, channel_id, parent_id=parent_channel_id)
    trigger = turn_trigger(event_id) if event_id is not None else None
    memories = await recall_for_prompt(
        session,
        user_ids=user_ids,
        place=place,
        actor=Actor.REPLY,
        trigger=trigger,
        query=query,
        meaning=meaning if query is not None else None,
    )
    block = render_memory_block(memories, names, dated=query is not None)
    blocks = [b for b in (render_pins(pins), block) if b]
    episodes = [e.content for e in await recent_episodes(session, channel_id, SUMMARY_EPISODES)]
    return PromptMemory(
        channel_summary=render_summary(episodes),
        memory_block="\n\n".join(blocks) if blocks else None,
        owners=frozenset(m.user_id for m in memories),
    )


def render_pins(pins: Sequence[str]) -> str | None:
    if not pins:
        return None
    facts = "\n".join(f"- {content}" for content in pins)
    return f"Facts the operators pinned for this place (treat them as true):\n{facts}"


def render_summary(episodes: Sequence[str]) -> str | None:
    """The newest episodes (given newest first), oldest first, as the channel summary."""
    if not episodes:
        return None
    texts = "\n\n".join(reversed(episodes))
    return f"What this channel has been about recently (oldest first):\n\n{texts}"
