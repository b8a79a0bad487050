"""MEM-04: the reply prompt's memory part. Pinned facts (global and this channel), the
memories of the speaker (or of the conversation's participants), every read logged, and the
channel's recent episodes as the channel summary. Nobody else's memories are loaded."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from sqlalchemy.ext.asyncio import AsyncSession

from app.channel.exchange import Place
from app.config import RecallScope, Settings
from app.episodes.store import recent_episodes
from app.kit.relevance import Query
from app.memory.recall import recall_for_prompt, render_memory_block
from app.memory.records import turn_trigger
from app.pins.store import pinned_facts
from app.vocabulary import Actor

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
) -> PromptMemory:
    """Read (and log, in the caller's transaction) what the reply prompt may remember:
    each person's newest memories, or with ``query`` (MEMORY_RECALL=relevant) the most
    relevant to it, dated.

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
        session, user_ids=user_ids, place=place, actor=Actor.REPLY, trigger=trigger, query=query
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
