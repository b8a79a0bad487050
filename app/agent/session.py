"""One task-agent session per channel: earlier turns' messages, bounded, kept in Postgres."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sqlalchemy import delete, func, select
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.ext.asyncio import AsyncSession

from app.db import SessionFactory
from app.kit.locks import xact_lock
from app.models.agent import AgentSession

Message = dict[str, Any]
Turn = list[Message]
LOCK_NAMESPACE = "agent_session"


@dataclass(frozen=True, slots=True)
class SessionLimits:
    max_turns: int = 8
    max_chars: int = 40_000


def turn_size(turn: Turn) -> int:
    return len(json.dumps(turn, ensure_ascii=False))


def compact_turn(turn: Turn) -> Turn:
    """Just the request and the final answer: no tool_use without its tool_result."""
    return [turn[0], turn[-1]] if len(turn) > 2 else turn


def trim_turns(turns: list[Turn], limits: SessionLimits) -> list[Turn]:
    """Keep the newest whole turns within both limits; never split a turn's messages.

    A newest turn too big on its own is kept in compact form (request and answer)."""
    kept: list[Turn] = []
    total = 0
    for turn in reversed(turns[-limits.max_turns :]):
        size = turn_size(turn)
        if not kept and size > limits.max_chars:
            turn = compact_turn(turn)
            size = turn_size(turn)
        if total + size > limits.max_chars:
            break
        kept.append(turn)
        total += size
    kept.reverse()
    return kept


def flatten(turns: list[Turn]) -> list[Message]:
    return [message for turn in turns for message in turn]


def _turns_from(history: Any) -> list[Turn]:
    """Stored JSON back to turns; anything unexpected counts as an empty session."""
    turns = history.get("turns") if isinstance(history, dict) else None
    if not isinstance(turns, list):
        return []
    return [turn for turn in turns if isinstance(turn, list) and turn]


class SessionStore:
    """Short transactions only: the advisory lock is held for a load or a save, never a run."""

    def __init__(self, sessions: SessionFactory, limits: SessionLimits | None = None) -> None:
        self._sessions = sessions
        self._limits = limits or SessionLimits()

    async def load(self, channel_id: int) -> list[Turn]:
        async with self._sessions() as db, db.begin():
            await xact_lock(db, LOCK_NAMESPACE, channel_id)
            history = await db.scalar(
                select(AgentSession.history).where(AgentSession.channel_id == channel_id)
            )
        return _turns_from(history)

    async def append(self, channel_id: int, turn: Turn) -> None:
        """Add a finished turn to whatever is stored now (a concurrent run's turn survives)."""
        async with self._sessions() as db, db.begin():
            await xact_lock(db, LOCK_NAMESPACE, channel_id)
            current = await db.scalar(
                select(AgentSession.history).where(AgentSession.channel_id == channel_id)
            )
            turns = trim_turns([*_turns_from(current), turn], self._limits)
            statement = insert(AgentSession).values(channel_id=channel_id, history={"turns": turns})
            await db.execute(
                statement.on_conflict_do_update(
                    index_elements=[AgentSession.channel_id],
                    set_={"history": statement.excluded.history, "updated_at": func.now()},
                )
            )


async def delete_mentioning(session: AsyncSession, doomed: Callable[[str], bool]) -> int:
    """Forget whole task sessions whose history ``doomed`` picks (an erasure: a session
    quotes the channel's lines and names who asked). One per channel, so this is bounded."""
    rows = (await session.execute(select(AgentSession.channel_id, AgentSession.history))).all()
    ids = [
        channel_id
        for channel_id, history in rows
        if doomed(json.dumps(history, ensure_ascii=False))
    ]
    if not ids:
        return 0
    result = await session.execute(
        delete(AgentSession)
        .where(AgentSession.channel_id.in_(ids))
        .returning(AgentSession.channel_id)
    )
    return len(result.all())
