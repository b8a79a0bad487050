"""One task-agent session per channel: earlier turns' messages, bounded, kept in Postgres."""

from __future__ import annotations

import json
import re
from collections.abc import Collection
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from sqlalchemy import Text, cast, delete, func, select, update
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.ext.asyncio import AsyncSession

from app.db import SessionFactory
from app.kit.locks import xact_lock
from app.kit.sql import mention_pattern
from app.models.agent import AgentSession
from app.privacy import store as register

Message = dict[str, Any]
Turn = list[Message]
LOCK_NAMESPACE = "agent_session"


@dataclass(frozen=True, slots=True)
class SessionLimits:
    max_turns: int = 8
    max_chars: int = 40_000


@dataclass(frozen=True, slots=True)
class StoredTurn:
    """A turn as kept: its messages and whose words it carries (None: stored before the
    authors were recorded)."""

    messages: Turn
    authors: frozenset[int] | None

    def as_json(self) -> dict[str, Any]:
        return {"authors": sorted(self.authors or ()), "messages": self.messages}


def turn_size(turn: Turn) -> int:
    return len(json.dumps(turn, ensure_ascii=False))


def compact_turn(turn: Turn) -> Turn:
    """Just the request and the final answer: no tool_use without its tool_result."""
    return [turn[0], turn[-1]] if len(turn) > 2 else turn


def trim_stored(turns: list[StoredTurn], limits: SessionLimits) -> list[StoredTurn]:
    """Keep the newest whole turns within both limits; never split a turn's messages.

    A newest turn too big on its own is kept in compact form (request and answer)."""
    kept: list[StoredTurn] = []
    total = 0
    for turn in reversed(turns[-limits.max_turns :]):
        size = turn_size(turn.messages)
        if not kept and size > limits.max_chars:
            turn = replace(turn, messages=compact_turn(turn.messages))
            size = turn_size(turn.messages)
        if total + size > limits.max_chars:
            break
        kept.append(turn)
        total += size
    kept.reverse()
    return kept


def flatten(turns: list[Turn]) -> list[Message]:
    return [message for turn in turns for message in turn]


def _stored_turns(history: Any) -> list[StoredTurn]:
    """Stored JSON back to turns; anything unexpected counts as an empty session."""
    turns = history.get("turns") if isinstance(history, dict) else None
    if not isinstance(turns, list):
        return []
    kept: list[StoredTurn] = []
    for turn in turns:
        if isinstance(turn, list) and turn:  # the form before authors were recorded
            kept.append(StoredTurn(turn, None))
        elif isinstance(turn, dict) and isinstance(turn.get("messages"), list) and turn["messages"]:
            authors = frozenset(int(a) for a in turn.get("authors") or ())
            kept.append(StoredTurn(turn["messages"], authors))
    return kept


def _history(turns: list[StoredTurn]) -> tuple[dict[str, Any], list[int]]:
    authors = sorted({a for t in turns for a in (t.authors or ())})
    return {"turns": [t.as_json() for t in turns]}, authors


def without_person(turns: list[StoredTurn], user_id: int, *, legacy_too: bool) -> list[StoredTurn]:
    """Pure: the turns an erasure keeps: none carrying the person's words, and none of
    unknown authorship when ``legacy_too`` (they spoke in this channel)."""
    return [
        t
        for t in turns
        if not (t.authors is None and legacy_too)
        and not (t.authors is not None and user_id in t.authors)
    ]


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
        return [t.messages for t in _stored_turns(history)]

    async def append(
        self,
        channel_id: int,
        turn: Turn,
        *,
        authors: Collection[int] = (),
        since: datetime | None = None,
    ) -> bool:
        """Add a finished turn to whatever is stored now (a concurrent run's turn survives);
        False when one of its ``authors`` was erased since the turn began (it is not kept)."""
        async with self._sessions() as db, db.begin():
            if await register.blocked(db, authors, since=since):
                return False
            await xact_lock(db, LOCK_NAMESPACE, channel_id)
            current = await db.scalar(
                select(AgentSession.history).where(AgentSession.channel_id == channel_id)
            )
            stored = [*_stored_turns(current), StoredTurn(turn, frozenset(authors))]
            history, all_authors = _history(trim_stored(stored, self._limits))
            statement = insert(AgentSession).values(
                channel_id=channel_id, history=history, author_ids=all_authors
            )
            await db.execute(
                statement.on_conflict_do_update(
                    index_elements=[AgentSession.channel_id],
                    set_={
                        "history": statement.excluded.history,
                        "author_ids": statement.excluded.author_ids,
                        "updated_at": func.now(),
                    },
                )
            )
        return True


async def forget_person(session: AsyncSession, user_id: int, spoke_in: Collection[int]) -> int:
    """Drop every stored turn carrying the person's words (and, in the channels they spoke
    in, every turn stored before authors were recorded); a session left empty goes. How
    many turns went. One session per channel, found by the authors index."""
    rows = await session.execute(
        select(AgentSession.channel_id, AgentSession.history).where(
            AgentSession.author_ids.contains([user_id])
            | AgentSession.channel_id.in_(list(spoke_in))
        )
    )
    dropped = 0
    for channel_id, history in rows.tuples():
        await xact_lock(session, LOCK_NAMESPACE, channel_id)
        turns = _stored_turns(history)
        kept = without_person(turns, user_id, legacy_too=channel_id in spoke_in)
        dropped += len(turns) - len(kept)
        if not kept:
            await session.execute(delete(AgentSession).where(AgentSession.channel_id == channel_id))
        elif len(kept) < len(turns):
            new, authors = _history(kept)
            await session.execute(
                update(AgentSession)
                .where(AgentSession.channel_id == channel_id)
                .values(history=new, author_ids=authors)
            )
    return dropped


async def replace_mentions(session: AsyncSession, user_id: int, token: str) -> int:
    """Replace the person's mentions inside stored turns (one session per channel)."""
    pattern = mention_pattern(user_id)
    rows = await session.execute(
        select(AgentSession.channel_id, AgentSession.history).where(
            cast(AgentSession.history, Text).regexp_match(pattern)
        )
    )
    changed = 0
    for channel_id, history in rows.tuples():
        text = re.sub(pattern, token, json.dumps(history, ensure_ascii=False))
        await session.execute(
            update(AgentSession)
            .where(AgentSession.channel_id == channel_id)
            .values(history=json.loads(text))
        )
        changed += 1
    return changed
