"""Recall for the reply prompt: the named people's memories, one logged read per person,
rendered as a single system block. Nobody else's memories are ever loaded."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from sqlalchemy.ext.asyncio import AsyncSession

from app.channel.exchange import Place
from app.memory import store
from app.memory.records import MemoryRecord, Why


async def recall_for_prompt(
    session: AsyncSession,
    *,
    user_ids: Sequence[int],
    place: Place,
    actor: str = "reply",
    limit: int = store.RECENT_LIMIT,
    trigger: str | None = None,
) -> list[MemoryRecord]:
    """Up to ``limit`` memories per user that may surface in ``place``, newest first,
    grouped in ``user_ids`` order: in a guild only what was learned in that guild, in a DM
    the owner's memories from anywhere.

    Each read is logged (committed by the caller), even one that finds nothing."""
    people = list(dict.fromkeys(user_ids))  # each person once, order kept
    await store.lock_owners(session, people)
    recalled: list[MemoryRecord] = []
    why = Why(actor, "recall", trigger=trigger)
    for user_id in people:
        recalled += await store.recent(session, user_id, why, limit=limit, place=place)
    return recalled


def render_memory_block(memories: Sequence[MemoryRecord], names: Mapping[int, str]) -> str | None:
    """The one system block the reply prompt carries, or None when there is nothing."""
    if not memories:
        return None
    sections: list[str] = []
    for user_id in dict.fromkeys(m.user_id for m in memories):
        name = names.get(user_id) or f"user {user_id}"
        facts = "\n".join(f"- {m.content}" for m in memories if m.user_id == user_id)
        sections.append(f"About {name}:\n{facts}")
    return (
        "What you remember from earlier conversations (notes that may be out of date; "
        "use them naturally, do not recite them):\n\n" + "\n\n".join(sections)
    )
