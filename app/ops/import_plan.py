"""MEM-08, planning (pure): which legacy rows to insert and why the others are skipped,
given what the target database already holds. Data of people who used `!forgetme` is never
brought back."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import date, datetime
from functools import partial
from typing import TypeVar

from app.frames.events import mentions_in
from app.ops.legacy import (
    TABLES,
    ImportFailed,
    LegacyData,
    LegacyEpisode,
    LegacyLogRow,
    LegacyMemory,
    LegacyMessage,
    LegacyRun,
    LegacySignal,
)
from app.privacy.identity import names_any, names_theirs_alone

T = TypeVar("T")


# --- what the target already holds ---------------------------------------------------------


@dataclass
class Existing:
    message_ids: set[int] = field(default_factory=set)
    memory_owners: dict[int, int] = field(default_factory=dict)
    # Legacy memory ids this database's own ledger mentions (changed or deleted here since).
    memory_history: set[int] = field(default_factory=set)
    erased_users: set[int] = field(default_factory=set)
    signal_ids: set[int] = field(default_factory=set)
    signal_keys: set[tuple[int, int, str, str]] = field(default_factory=set)
    runs: dict[tuple[date, datetime], int] = field(default_factory=dict)
    live_days: set[date] = field(default_factory=set)
    log_keys: set[str] = field(default_factory=set)
    episodes: set[tuple[int, str]] = field(default_factory=set)


# --- the plan (pure) -----------------------------------------------------------------------

PRESENT = "already present"
ERASED = "person used !forgetme"
HISTORY = "id has newer history here (changed or deleted since)"
BLANK = "blank string"
MENTIONS_ERASED = "mentions a person who used !forgetme"


@dataclass
class TableCount:
    insert: int = 0
    skip: dict[str, int] = field(default_factory=dict)

    def skipped(self, reason: str, n: int = 1) -> None:
        if n > 0:
            self.skip[reason] = self.skip.get(reason, 0) + n

    @property
    def skipped_total(self) -> int:
        return sum(self.skip.values())


@dataclass
class Plan:
    messages: list[LegacyMessage] = field(default_factory=list)
    memories: list[LegacyMemory] = field(default_factory=list)
    memory_log: list[LegacyLogRow] = field(default_factory=list)
    signals: list[LegacySignal] = field(default_factory=list)
    runs: list[LegacyRun] = field(default_factory=list)
    run_ids: dict[int, int] = field(default_factory=dict)  # legacy run id -> id here
    episodes: list[LegacyEpisode] = field(default_factory=list)
    counts: dict[str, TableCount] = field(
        default_factory=lambda: {name: TableCount() for name in (*TABLES, "episodes")}
    )


def plan_import(data: LegacyData, existing: Existing) -> Plan:
    """Which legacy rows to insert and why the others are skipped; ImportFailed on a clash."""
    _check_memory_owners(data.memories, existing)
    plan = Plan()
    names = _erased_names(data.messages, existing.erased_users)
    _keep(plan, "messages", data.messages, plan.messages, partial(_skip_message, existing))
    _keep(plan, "memories", data.memories, plan.memories, partial(_skip_memory, existing))
    _keep(plan, "signals", data.signals, plan.signals, partial(_skip_signal, existing))
    _plan_runs(plan, data.nightly_runs, existing)
    _keep(plan, "memory_log", data.memory_log, plan.memory_log, partial(_skip_log, existing))
    skip_episode = partial(_skip_episode, existing, names)
    _keep(plan, "episodes", data.episodes, plan.episodes, skip_episode)
    plan.counts["episodes"].skipped(BLANK, data.empty_episodes)
    return plan


def _check_memory_owners(memories: Sequence[LegacyMemory], existing: Existing) -> None:
    for memory in memories:
        owner = existing.memory_owners.get(memory.id)
        if owner is None or owner == memory.user_id or memory.user_id in existing.erased_users:
            continue
        raise ImportFailed(
            f"memories row id={memory.id}: that id belongs to another person's memory in "
            "this database; import into a fresh database"
        )


def _skip_message(existing: Existing, message: LegacyMessage) -> str | None:
    if message.author_id in existing.erased_users:
        return ERASED
    return PRESENT if message.id in existing.message_ids else None


def _skip_memory(existing: Existing, memory: LegacyMemory) -> str | None:
    if memory.user_id in existing.erased_users:
        return ERASED
    if memory.id in existing.memory_owners:
        return PRESENT
    # Imported before and deleted since (a `!memory forget`, a decay): it stays deleted.
    return HISTORY if memory.id in existing.memory_history else None


def _skip_signal(existing: Existing, signal: LegacySignal) -> str | None:
    if signal.user_id in existing.erased_users:
        return ERASED
    if signal.id in existing.signal_ids or signal.natural_key in existing.signal_keys:
        return PRESENT
    return None


def _skip_log(existing: Existing, row: LegacyLogRow) -> str | None:
    if row.user_id in existing.erased_users:
        return ERASED
    return PRESENT if row.key in existing.log_keys else None


def _skip_episode(existing: Existing, names: list[str], episode: LegacyEpisode) -> str | None:
    if (episode.channel_id, episode.content) in existing.episodes:
        return PRESENT
    if mentions_in(episode.content) & existing.erased_users or (
        names and names_any(episode.content, names)
    ):
        return MENTIONS_ERASED
    return None


def _keep(
    plan: Plan, table: str, rows: Sequence[T], out: list[T], why_not: Callable[[T], str | None]
) -> None:
    count = plan.counts[table]
    for row in rows:
        reason = why_not(row)
        if reason is None:
            out.append(row)
            count.insert += 1
        else:
            count.skipped(reason)


def _plan_runs(plan: Plan, runs: Sequence[LegacyRun], existing: Existing) -> None:
    count = plan.counts["nightly_runs"]
    for run in runs:
        here = existing.runs.get(run.key)
        if here is not None:
            plan.run_ids[run.id] = here
            count.skipped(PRESENT)
            continue
        if run.rolled_back_at is None and run.day in existing.live_days:
            raise ImportFailed(
                f"nightly_runs row id={run.id}: this database already has a run for {run.day}"
            )
        plan.runs.append(run)
        count.insert += 1


def _erased_names(messages: Sequence[LegacyMessage], erased: set[int]) -> list[str]:
    """The erased people's names as MEM-09 counts them: ones no other author used."""
    names: list[str] = []
    for user_id in sorted(erased):
        said = {m.author_name for m in messages if m.author_id == user_id}
        others = {m.author_name for m in messages if m.author_id != user_id}
        names.extend(names_theirs_alone(said, others))
    return names


@dataclass(frozen=True, slots=True)
class ImportReport:
    dry_run: bool
    tables: dict[str, TableCount]

    def render(self) -> str:
        verb = "would insert" if self.dry_run else "inserted"
        lines = ["Dry run: nothing was written." if self.dry_run else "Import committed."]
        for table, count in self.tables.items():
            reasons = ", ".join(f"{n} {why}" for why, n in sorted(count.skip.items()))
            skipped = f"; skipped {count.skipped_total}" + (f" ({reasons})" if reasons else "")
            lines.append(f"  {table}: {verb} {count.insert}{skipped}")
        return "\n".join(lines)
