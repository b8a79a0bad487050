"""Undo one nightly run from its memory_log rows, never overwriting anything changed since.

``plan_rollback`` decides over plain data; ``rollback_run`` locks, re-reads and applies."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy import delete, insert, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from app.db import SessionFactory
from app.kit.clock import utcnow
from app.kit.locks import xact_lock
from app.memory import ledger, repository
from app.models.memory import Memory, MemoryLog
from app.models.nightly import NightlyRun, StyleOverride

# Held by each nightly step for its whole length, so a rollback never lands mid-step.
RUN_LOCK = "nightly_run"
UNDOABLE = ("add", "update", "delete")


@dataclass(frozen=True, slots=True)
class MemoryState:
    id: int
    user_id: int
    content: str
    source: str = "self"
    created_at: datetime | None = None
    updated_at: datetime | None = None


@dataclass(frozen=True, slots=True)
class LogEntry:
    """One memory_log row of the run, as the planner needs it."""

    id: int
    memory_id: int | None
    user_id: int
    action: str
    before: Mapping[str, Any] | None
    after: Mapping[str, Any] | None


@dataclass(frozen=True, slots=True)
class DeleteOp:
    """Undo an add: the record still holds exactly what the run wrote."""

    current: MemoryState


@dataclass(frozen=True, slots=True)
class RestoreOp:
    """Undo an update: put the before content back."""

    current: MemoryState
    restored: MemoryState


@dataclass(frozen=True, slots=True)
class ReinsertOp:
    """Undo a delete: the id is still free, so the before state comes back under it."""

    restored: MemoryState


@dataclass(frozen=True, slots=True)
class Skip:
    memory_id: int
    action: str
    reason: str


Op = DeleteOp | RestoreOp | ReinsertOp


@dataclass
class Plan:
    ops: list[Op] = field(default_factory=list)
    skipped: list[Skip] = field(default_factory=list)

    def _ids(self, kind: type[Op]) -> list[int]:
        ids: list[int] = []
        for op in self.ops:
            memory_id = op.current.id if isinstance(op, DeleteOp) else op.restored.id
            if isinstance(op, kind) and memory_id not in ids:
                ids.append(memory_id)
        return ids

    @property
    def deleted(self) -> list[int]:
        return self._ids(DeleteOp)

    @property
    def restored(self) -> list[int]:
        return self._ids(RestoreOp)

    @property
    def reinserted(self) -> list[int]:
        return self._ids(ReinsertOp)


def _content(state: Mapping[str, Any] | None) -> str | None:
    value = state.get("content") if state else None
    return value if isinstance(value, str) else None


def _time(value: object) -> datetime | None:
    if isinstance(value, datetime):
        return value
    if isinstance(value, str):
        try:
            return datetime.fromisoformat(value)
        except ValueError:
            return None
    return None


def state_from_json(memory_id: int, user_id: int, data: Mapping[str, Any]) -> MemoryState | None:
    """A memory as the ledger recorded it; None when the record has no text to restore."""
    content = _content(data)
    if content is None:
        return None
    source = data.get("source")
    return MemoryState(
        id=memory_id,
        user_id=user_id,
        content=content,
        source=source if isinstance(source, str) else "self",
        created_at=_time(data.get("created_at")),
        updated_at=_time(data.get("updated_at")),
    )


def state_json(state: MemoryState) -> dict[str, Any]:
    """The ledger's before/after shape for one memory (snowflakes as strings)."""
    return {
        "id": state.id,
        "user_id": str(state.user_id),
        "content": state.content,
        "source": state.source,
        "created_at": state.created_at.isoformat() if state.created_at else None,
        "updated_at": state.updated_at.isoformat() if state.updated_at else None,
    }


def plan_rollback(log_rows: Iterable[LogEntry], current_rows: Mapping[int, MemoryState]) -> Plan:
    """Replay the run's changes in reverse over the current rows (pure).

    A record that changed after the run is skipped, and so is every older change the run
    made to it: undoing those would overwrite the later change too."""
    plan = Plan()
    state: dict[int, MemoryState | None] = dict(current_rows)
    tainted: set[int] = set()
    for entry in sorted(log_rows, key=lambda row: row.id, reverse=True):
        if entry.action not in UNDOABLE or entry.memory_id is None:
            continue
        memory_id = entry.memory_id
        if memory_id in tainted:
            plan.skipped.append(Skip(memory_id, entry.action, "changed again after the run"))
            continue
        outcome = _undo(entry, state.get(memory_id))
        if isinstance(outcome, str):
            plan.skipped.append(Skip(memory_id, entry.action, outcome))
            tainted.add(memory_id)
            continue
        plan.ops.append(outcome)
        state[memory_id] = None if isinstance(outcome, DeleteOp) else outcome.restored
    return plan


def _undo(entry: LogEntry, current: MemoryState | None) -> Op | str:
    """The op that undoes ``entry`` given the record's state now, or the reason it cannot."""
    memory_id = entry.memory_id
    assert memory_id is not None
    if entry.action == "delete":
        if current is not None:
            return "the id exists again"
        restored = state_from_json(memory_id, entry.user_id, entry.before or {})
        return ReinsertOp(restored) if restored else "no before state recorded"
    if current is None:
        return "deleted after the run"
    if current.user_id != entry.user_id or current.content != _content(entry.after):
        return "changed after the run"
    if entry.action == "add":
        return DeleteOp(current)
    before = _content(entry.before)
    if before is None:
        return "no before state recorded"
    updated_at = _time((entry.before or {}).get("updated_at")) or current.updated_at
    restored = MemoryState(
        memory_id, current.user_id, before, current.source, current.created_at, updated_at
    )
    return RestoreOp(current, restored)


# --- the applier -------------------------------------------------------------------------


class RunNotFound(LookupError):
    pass


class AlreadyRolledBack(Exception):
    def __init__(self, run_id: int) -> None:
        super().__init__(f"nightly run {run_id} is already rolled back")
        self.run_id = run_id


@dataclass(frozen=True, slots=True)
class RollbackResult:
    run_id: int
    dry_run: bool
    plan: Plan


def _entry(row: MemoryLog) -> LogEntry:
    return LogEntry(row.id, row.memory_id, row.user_id, row.action, row.before, row.after)


def _state(row: Memory) -> MemoryState:
    return MemoryState(row.id, row.user_id, row.content, row.source, row.created_at, row.updated_at)


async def _target_run(session: AsyncSession, run_id: int | None) -> NightlyRun:
    if run_id is None:
        run_id = await session.scalar(select(NightlyRun.id).order_by(NightlyRun.id.desc()))
        if run_id is None:
            raise RunNotFound("no nightly run yet")
    # Waits for a step of this run that is still working (steps hold the same lock).
    await xact_lock(session, RUN_LOCK, run_id)
    run = await session.scalar(select(NightlyRun).where(NightlyRun.id == run_id).with_for_update())
    if run is None:
        raise RunNotFound(f"no nightly run {run_id}")
    if run.rolled_back_at is not None:
        raise AlreadyRolledBack(run_id)
    return run


async def _current_rows(
    session: AsyncSession, entries: Sequence[LogEntry]
) -> dict[int, MemoryState]:
    # The write path's per-user lock, taken in a fixed order so two rollbacks cannot deadlock.
    for user_id in sorted({entry.user_id for entry in entries}):
        await repository.lock_user(session, user_id)
    ids = {entry.memory_id for entry in entries if entry.memory_id is not None}
    if not ids:
        return {}
    rows = await session.scalars(select(Memory).where(Memory.id.in_(ids)).with_for_update())
    return {row.id: _state(row) for row in rows}


async def rollback_run(
    sessions: SessionFactory, run_id: int | None, *, dry_run: bool
) -> RollbackResult:
    """Undo ``run_id`` (the latest run when None); a dry run plans and changes nothing."""
    try:
        async with sessions() as session, session.begin():
            run = await _target_run(session, run_id)
            logged = await session.scalars(
                select(MemoryLog)
                .where(MemoryLog.run_id == run.id, MemoryLog.action.in_(UNDOABLE))
                .order_by(MemoryLog.id.desc())
            )
            entries = [_entry(row) for row in logged]
            plan = plan_rollback(entries, await _current_rows(session, entries))
            if dry_run:
                raise _DryRun(RollbackResult(run.id, True, plan))  # leaves via rollback
            await _apply(session, run.id, plan)
            await _finish(session, run)
    except _DryRun as dry:
        return dry.result
    ledger.count_changes("nightly", "rollback", len(plan.ops))
    return RollbackResult(run.id, False, plan)


class _DryRun(Exception):
    """Abort the transaction (nothing written, locks released) and hand back the plan."""

    def __init__(self, result: RollbackResult) -> None:
        super().__init__("dry run")
        self.result = result


async def _apply(session: AsyncSession, run_id: int, plan: Plan) -> None:
    for op in plan.ops:
        if isinstance(op, DeleteOp):
            await session.execute(delete(Memory).where(Memory.id == op.current.id))
            await _log(
                session, run_id, op.current.id, op.current.user_id, "undo add", op.current, None
            )
        elif isinstance(op, RestoreOp):
            values: dict[str, Any] = {"content": op.restored.content}
            if op.restored.updated_at is not None:
                values["updated_at"] = op.restored.updated_at
            await session.execute(update(Memory).where(Memory.id == op.current.id).values(values))
            await _log(
                session,
                run_id,
                op.current.id,
                op.current.user_id,
                "undo update",
                op.current,
                op.restored,
            )
        else:
            await session.execute(insert(Memory).values(_insert_values(op.restored)))
            await _log(
                session,
                run_id,
                op.restored.id,
                op.restored.user_id,
                "undo delete",
                None,
                op.restored,
            )


def _insert_values(state: MemoryState) -> dict[str, Any]:
    # memories.id is GENERATED BY DEFAULT, so the original id can be written back.
    values: dict[str, Any] = {
        "id": state.id,
        "user_id": state.user_id,
        "content": state.content,
        "source": state.source,
    }
    if state.created_at is not None:
        values["created_at"] = state.created_at
    if state.updated_at is not None:
        values["updated_at"] = state.updated_at
    return values


async def _log(
    session: AsyncSession,
    run_id: int,
    memory_id: int,
    user_id: int,
    reason: str,
    before: MemoryState | None,
    after: MemoryState | None,
) -> None:
    await ledger.log_change(
        session,
        action="rollback",
        memory_id=memory_id,
        user_id=user_id,
        actor="nightly",
        reason=reason,
        before=state_json(before) if before else None,
        after=state_json(after) if after else None,
        run_id=run_id,
    )


async def _finish(session: AsyncSession, run: NightlyRun) -> None:
    now = utcnow()
    await session.execute(
        update(StyleOverride)
        .where(StyleOverride.run_id == run.id, StyleOverride.reverted_at.is_(None))
        .values(reverted_at=now)
    )
    run.rolled_back_at = now
    if run.status == "running":
        # Its remaining steps see rolled_back_at and stop; the run will not finish.
        run.status = "failed"
        run.summary = {
            **run.summary,
            "errors": [*run.summary.get("errors", []), "rolled back before it finished"],
        }
    await session.flush()
