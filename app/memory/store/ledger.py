"""The ledger as the write path, the nightly summary and the rollback read it, and the rollback's
own changes."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import (
    delete,
    exists,
    insert,
    select,
    update,
)
from sqlalchemy.ext.asyncio import AsyncSession

from app.kit.tokens import tokenize
from app.memory.records import (
    Forgetting,
    Forgotten,
    LogEntry,
    MemoryRecord,
    Why,
    encode,
)
from app.memory.store.rows import _fresh, _log, _origin_values, _record, lock_owners
from app.models.memory import (
    Memory,
    MemoryLog,
)
from app.vocabulary import FORGOT_MEMORY, FORGOT_PERSON, UNDOABLE, Action, Actor


async def trigger_applied(session: AsyncSession, *, user_id: int, trigger: str) -> bool:
    """True when an earlier run of this trigger already changed this person's memories.

    Scoped by user so the lookup rides the (user_id, trigger) index."""
    query = select(
        exists().where(
            MemoryLog.user_id == user_id,
            MemoryLog.trigger == trigger,
            MemoryLog.action.in_((*UNDOABLE, Action.ROLLBACK)),
        )
    )
    return bool((await session.execute(query)).scalar_one())


async def run_entries(session: AsyncSession, run_id: int) -> list[LogEntry]:
    """The run's undoable ledger rows, newest first."""
    rows = await session.scalars(
        select(MemoryLog)
        .where(MemoryLog.run_id == run_id, MemoryLog.action.in_(UNDOABLE))
        .order_by(MemoryLog.id.desc())
    )
    return [
        LogEntry(row.id, row.memory_id, row.user_id, row.action, row.before, row.after)
        for row in rows
    ]


async def run_changes(
    session: AsyncSession, run_id: int, actors: Sequence[Actor]
) -> list[tuple[int, Actor, Action]]:
    """(memory id, actor, action) of every change the run made, in ledger order."""
    rows = await session.execute(
        select(MemoryLog.memory_id, MemoryLog.actor, MemoryLog.action)
        .where(
            MemoryLog.run_id == run_id,
            MemoryLog.actor.in_(actors),
            MemoryLog.action.in_(UNDOABLE),
            MemoryLog.memory_id.is_not(None),
        )
        .order_by(MemoryLog.id)
    )
    return [(int(memory_id), Actor(actor), Action(action)) for memory_id, actor, action in rows]


async def forgotten(session: AsyncSession, entries: Sequence[LogEntry]) -> Forgotten:
    """Every ledger row that forgot one of these memories, or everything of one of their
    owners (what a rollback must never bring back)."""
    memory_ids = {e.memory_id for e in entries if e.memory_id is not None}
    user_ids = {e.user_id for e in entries}
    if not memory_ids:
        return Forgotten()
    rows = await session.execute(
        select(MemoryLog.id, MemoryLog.memory_id, MemoryLog.user_id, MemoryLog.actor).where(
            MemoryLog.action == Action.DELETE,
            MemoryLog.actor.in_([*FORGOT_MEMORY, *FORGOT_PERSON]),
            MemoryLog.memory_id.in_(memory_ids)
            | (MemoryLog.memory_id.is_(None) & MemoryLog.user_id.in_(user_ids)),
        )
    )
    memories: dict[int, list[Forgetting]] = {}
    people: dict[int, list[Forgetting]] = {}
    for ledger_id, memory_id, user_id, actor in rows:
        if memory_id is not None:
            memories.setdefault(memory_id, []).append(Forgetting(ledger_id, Actor(actor)))
        elif actor in FORGOT_PERSON:
            people.setdefault(user_id, []).append(Forgetting(ledger_id, Actor(actor), True))
    return Forgotten(memories, people)


async def current_for_rollback(
    session: AsyncSession, entries: Sequence[LogEntry]
) -> dict[int, MemoryRecord]:
    """The entries' memories as they are now, their owners locked and the rows locked."""
    await lock_owners(session, {entry.user_id for entry in entries})
    ids = {entry.memory_id for entry in entries if entry.memory_id is not None}
    if not ids:
        return {}
    rows = await session.scalars(_fresh(Memory.id.in_(ids)).with_for_update())
    return {row.id: _record(row) for row in rows}


async def rollback_delete(session: AsyncSession, current: MemoryRecord, why: Why) -> None:
    """Undo an add (the caller checked the record is still what the run wrote)."""
    await session.execute(delete(Memory).where(Memory.id == current.id))
    await _log(session, why, Action.ROLLBACK, current.user_id, current.id, encode(current), None)


async def rollback_restore(
    session: AsyncSession, current: MemoryRecord, restored: MemoryRecord, why: Why
) -> None:
    """Undo an update: the before content (and its updated_at) back."""
    # The older text comes back under the current origin: a rollback never widens it.
    values: dict[str, Any] = {
        "content": restored.content,
        "search_tokens": tokenize(restored.content),
    }
    if restored.updated_at is not None:
        values["updated_at"] = restored.updated_at
    await session.execute(update(Memory).where(Memory.id == current.id).values(values))
    await _log(
        session,
        why,
        Action.ROLLBACK,
        current.user_id,
        current.id,
        encode(current),
        encode(restored),
    )


async def rollback_reinsert(session: AsyncSession, restored: MemoryRecord, why: Why) -> None:
    """Undo a delete: the before state back under its own id (the id is still free)."""
    # memories.id is GENERATED BY DEFAULT, so the original id can be written back.
    values: dict[str, Any] = {
        "id": restored.id,
        "user_id": restored.user_id,
        "content": restored.content,
        "search_tokens": tokenize(restored.content),
        "source": restored.source,
        **_origin_values(restored.origin),
    }
    if restored.created_at is not None:
        values["created_at"] = restored.created_at
    if restored.updated_at is not None:
        values["updated_at"] = restored.updated_at
    await session.execute(insert(Memory).values(values))
    await _log(session, why, Action.ROLLBACK, restored.user_id, restored.id, None, encode(restored))
