"""Undo one nightly run from its memory_log rows, never overwriting anything changed since.

``plan_rollback`` decides over plain data; ``rollback_run`` locks, re-reads and applies
through the memory store (which logs each undo) and marks the run rolled back."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from sqlalchemy.ext.asyncio import AsyncSession

from app.db import SessionFactory
from app.kit.clock import utcnow
from app.memory import records, store
from app.memory.records import Forgotten, LogEntry, MemoryRecord, Why, recorded_content
from app.nightly import store as runs
from app.vocabulary import UNDOABLE, Action, Actor, SkipReason


@dataclass(frozen=True, slots=True)
class DeleteOp:
    """Undo an add: the record still holds exactly what the run wrote."""

    current: MemoryRecord


@dataclass(frozen=True, slots=True)
class RestoreOp:
    """Undo an update: put the before content back."""

    current: MemoryRecord
    restored: MemoryRecord


@dataclass(frozen=True, slots=True)
class ReinsertOp:
    """Undo a delete: the id is still free, so the before state comes back under it."""

    restored: MemoryRecord


@dataclass(frozen=True, slots=True)
class Skip:
    memory_id: int
    action: str
    reason: SkipReason


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


def plan_rollback(
    log_rows: Iterable[LogEntry],
    current_rows: Mapping[int, MemoryRecord],
    forgotten: Forgotten | None = None,
) -> Plan:
    """Replay the run's changes in reverse over the current rows (pure).

    A record that changed after the run is skipped, and so is every older change the run
    made to it: undoing those would overwrite the later change too. Nothing forgotten comes
    back: a memory its owner or staff deleted after the run, a memory of a person who ran
    `!memory forget all` or was erased after the run, a memory expired by retention."""
    forgotten = forgotten or Forgotten()
    plan = Plan()
    state: dict[int, MemoryRecord | None] = dict(current_rows)
    tainted: set[int] = set()
    for entry in sorted(log_rows, key=lambda row: row.id, reverse=True):
        if entry.action not in UNDOABLE or entry.memory_id is None:
            continue
        memory_id = entry.memory_id
        if memory_id in tainted:
            plan.skipped.append(Skip(memory_id, entry.action, SkipReason.CHANGED_AGAIN))
            continue
        outcome = forgotten.reason_for(entry) or _undo(entry, state.get(memory_id))
        if isinstance(outcome, SkipReason):
            plan.skipped.append(Skip(memory_id, entry.action, outcome))
            tainted.add(memory_id)
            continue
        plan.ops.append(outcome)
        state[memory_id] = None if isinstance(outcome, DeleteOp) else outcome.restored
    return plan


def _undo(entry: LogEntry, current: MemoryRecord | None) -> Op | SkipReason:
    """The op that undoes ``entry`` given the record's state now, or the reason it cannot."""
    memory_id = entry.memory_id
    assert memory_id is not None
    if entry.action == Action.DELETE:
        if current is not None:
            return SkipReason.ID_TAKEN
        restored = records.decode(memory_id, entry.user_id, entry.before)
        return ReinsertOp(restored) if restored else SkipReason.NO_BEFORE
    if current is None:
        return SkipReason.DELETED
    if current.user_id != entry.user_id or current.content != recorded_content(entry.after):
        return SkipReason.CHANGED
    if entry.action == Action.ADD:
        return DeleteOp(current)
    recorded = records.decode(memory_id, entry.user_id, entry.before)
    if recorded is None:
        return SkipReason.NO_BEFORE
    updated_at = recorded.updated_at or current.updated_at
    restored = MemoryRecord(
        memory_id, current.user_id, recorded.content, current.source, current.created_at, updated_at
    )
    return RestoreOp(current, restored)


# --- the applier -------------------------------------------------------------------------


class RunNotFound(LookupError):
    pass


class ContentRedacted(Exception):
    """Ledger content retention removed the text this rollback would need."""

    def __init__(self, run_id: int) -> None:
        super().__init__(f"nightly run {run_id}: its ledger text is past LEDGER_CONTENT_DAYS")
        self.run_id = run_id


class AlreadyRolledBack(Exception):
    def __init__(self, run_id: int) -> None:
        super().__init__(f"nightly run {run_id} is already rolled back")
        self.run_id = run_id


@dataclass(frozen=True, slots=True)
class RollbackResult:
    run_id: int
    dry_run: bool
    plan: Plan


async def rollback_run(
    sessions: SessionFactory, run_id: int | None, *, dry_run: bool
) -> RollbackResult:
    """Undo ``run_id`` (the latest run when None); a dry run plans and changes nothing."""
    try:
        async with sessions() as session, session.begin():
            run = await _target_run(session, run_id)
            entries = await store.run_entries(session, run.id)
            current = await store.current_for_rollback(session, entries)
            # Read under the owners' locks: a forget racing this rollback either committed
            # before (and is seen here) or waits for it (and then deletes what it restored).
            forgotten = await store.forgotten(session, entries)
            plan = plan_rollback(entries, current, forgotten)
            if dry_run:
                raise _DryRun(RollbackResult(run.id, True, plan))  # leaves via rollback
            await _apply(session, run.id, plan)
            await runs.mark_rolled_back(session, run, utcnow())
    except _DryRun as dry:
        return dry.result
    return RollbackResult(run.id, False, plan)


async def _target_run(session: AsyncSession, run_id: int | None) -> runs.Run:
    if run_id is None:
        run_id = await runs.latest_id(session)
        if run_id is None:
            raise RunNotFound("no nightly run yet")
    # Waits for a step of this run that is still working (steps hold the same lock).
    await runs.lock_run(session, run_id)
    run = await runs.get(session, run_id, for_update=True)
    if run is None:
        raise RunNotFound(f"no nightly run {run_id}")
    if run.rolled_back_at is not None:
        raise AlreadyRolledBack(run_id)
    if run.content_redacted_at is not None:
        raise ContentRedacted(run_id)
    return run


class _DryRun(Exception):
    """Abort the transaction (nothing written, locks released) and hand back the plan."""

    def __init__(self, result: RollbackResult) -> None:
        super().__init__("dry run")
        self.result = result


async def _apply(session: AsyncSession, run_id: int, plan: Plan) -> None:
    for op in plan.ops:
        match op:
            case DeleteOp(current=current):
                await store.rollback_delete(session, current, _why(run_id, "undo add"))
            case RestoreOp(current=current, restored=restored):
                why = _why(run_id, "undo update")
                await store.rollback_restore(session, current, restored, why)
            case ReinsertOp(restored=restored):
                await store.rollback_reinsert(session, restored, _why(run_id, "undo delete"))


def _why(run_id: int, reason: str) -> Why:
    return Why(Actor.NIGHTLY, reason, run_id=run_id)
