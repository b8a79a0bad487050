"""Recall for the reply prompt: the named people's memories, one logged read per person,
rendered as a single system block. Nobody else's memories are ever loaded."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy.ext.asyncio import AsyncSession

from app.memory import ledger, repository


@dataclass(frozen=True, slots=True)
class RecalledMemory:
    id: int
    user_id: int
    content: str
    updated_at: datetime


async def recall_for_prompt(
    session: AsyncSession,
    *,
    user_ids: Sequence[int],
    actor: str = "reply",
    limit: int = repository.RECENT_LIMIT,
) -> list[RecalledMemory]:
    """Up to ``limit`` memories per user, newest first, grouped in ``user_ids`` order.

    Each read is logged (flushed, committed by the caller), even one that finds nothing."""
    recalled: list[RecalledMemory] = []
    for user_id in dict.fromkeys(user_ids):  # each person once, order kept
        rows = await repository.recent_memories(session, user_id, limit)
        await ledger.log_read(
            session, user_id=user_id, ids=[m.id for m in rows], actor=actor, reason="recall"
        )
        recalled.extend(RecalledMemory(m.id, m.user_id, m.content, m.updated_at) for m in rows)
    return recalled


def render_memory_block(memories: Sequence[RecalledMemory], names: Mapping[int, str]) -> str | None:
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
