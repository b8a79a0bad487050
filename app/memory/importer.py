"""MEM-08: load an existing deployment — the original bot's SQLite database and its legacy
per-channel memory strings — into Postgres, idempotently, in one transaction.

Read and validate everything first (any bad table or row stops the import before a write),
look up what the target already holds, plan the inserts in a pure function, then apply them.
A dry run stops after the plan. Data of people who used `!forgetme` is never brought back."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, date, datetime
from functools import partial
from pathlib import Path
from typing import Any, TypeVar

from sqlalchemy import BigInteger, Date, Text, any_, literal, or_, select, text
from sqlalchemy.dialects.postgresql import ARRAY, insert
from sqlalchemy.ext.asyncio import AsyncSession

from app.db import SessionFactory
from app.kit.locks import xact_lock
from app.memory.erasure import ACTOR as ERASURE_ACTOR
from app.memory.erasure import erasure_names, mentions_any
from app.models.memory import ACTIONS, ACTORS, Episode, Memory, MemoryLog
from app.models.messages import Message
from app.models.nightly import NightlyRun
from app.models.signals import Signal

LOCK_NAMESPACE = "legacy-import"
TRIGGER_PREFIX = "import:"
SOURCE = "import"
_MAX_ID = 2**63 - 1
_MS_THRESHOLD = 100_000_000_000  # a number above this is epoch milliseconds, below: seconds

TABLES = ("messages", "memories", "memory_log", "signals", "nightly_runs")
REQUIRED: dict[str, tuple[str, ...]] = {
    "messages": ("id", "channel_id", "author_id", "author_name", "content", "created_at"),
    "memories": ("id", "user_id", "content", "created_at", "updated_at"),
    "memory_log": ("id", "user_id", "actor", "action", "created_at"),
    "signals": ("id", "message_id", "user_id", "kind", "value", "created_at"),
    "nightly_runs": ("id", "day", "started_at"),
}
SIGNAL_KINDS = ("reaction", "correction")

T = TypeVar("T")


class ImportFailed(Exception):
    """The input is unusable; the message names the file, table, row and column."""


# --- legacy rows, validated ----------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class LegacyMessage:
    id: int
    channel_id: int
    guild_id: int | None
    author_id: int
    author_name: str
    is_bot: bool
    content: str
    reply_to_id: int | None
    created_at: datetime
    edited_at: datetime | None
    deleted_at: datetime | None


@dataclass(frozen=True, slots=True)
class LegacyMemory:
    id: int
    user_id: int
    content: str
    created_at: datetime
    updated_at: datetime


@dataclass(frozen=True, slots=True)
class LegacyLogRow:
    id: int
    memory_id: int | None
    user_id: int
    actor: str
    action: str
    reason: str
    before: Any
    after: Any
    run_id: int | None
    created_at: datetime

    @property
    def key(self) -> str:
        """The import's de-duplication key, stored in ``memory_log.trigger``."""
        return f"{TRIGGER_PREFIX}memory_log:{self.id}"


@dataclass(frozen=True, slots=True)
class LegacySignal:
    id: int
    message_id: int
    user_id: int
    kind: str
    value: str
    created_at: datetime

    @property
    def natural_key(self) -> tuple[int, int, str, str]:
        return (self.message_id, self.user_id, self.kind, self.value)


@dataclass(frozen=True, slots=True)
class LegacyRun:
    id: int
    day: date
    diary: str | None
    summary: dict[str, Any]
    started_at: datetime
    finished_at: datetime | None
    rolled_back_at: datetime | None

    @property
    def key(self) -> tuple[date, datetime]:
        return (self.day, self.started_at)


@dataclass(frozen=True, slots=True)
class LegacyEpisode:
    channel_id: int
    content: str


@dataclass
class LegacyData:
    messages: list[LegacyMessage] = field(default_factory=list)
    memories: list[LegacyMemory] = field(default_factory=list)
    memory_log: list[LegacyLogRow] = field(default_factory=list)
    signals: list[LegacySignal] = field(default_factory=list)
    nightly_runs: list[LegacyRun] = field(default_factory=list)
    episodes: list[LegacyEpisode] = field(default_factory=list)
    empty_episodes: int = 0


# --- value parsers (pure) ------------------------------------------------------------------


class _Bad(ValueError):
    """One value is wrong; the row reader adds where."""


def _snowflake(value: Any) -> int:
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= _MAX_ID:
        return value
    if isinstance(value, str) and value.strip().isascii() and value.strip().isdigit():
        number = int(value.strip())
        if number <= _MAX_ID:
            return number
    raise _Bad(f"expected an id (integer or string of digits), got {_show(value)}")


def _optional_snowflake(value: Any) -> int | None:
    return None if value is None or value == "" else _snowflake(value)


def _timestamp(value: Any) -> datetime:
    """ISO-8601 text (naive means UTC), or epoch milliseconds / seconds (number or digits)."""
    if isinstance(value, str) and value.strip().lstrip("-").isdigit():
        value = int(value.strip())
    if isinstance(value, int | float) and not isinstance(value, bool):
        seconds = value / 1000 if abs(value) >= _MS_THRESHOLD else float(value)
        try:
            return datetime.fromtimestamp(seconds, tz=UTC)
        except (OverflowError, OSError, ValueError):
            raise _Bad(f"timestamp out of range: {_show(value)}") from None
    if isinstance(value, str):
        try:
            moment = datetime.fromisoformat(value.strip())
        except ValueError:
            raise _Bad(f"expected an ISO timestamp or epoch ms, got {_show(value)}") from None
        return moment if moment.tzinfo else moment.replace(tzinfo=UTC)
    raise _Bad(f"expected an ISO timestamp or epoch ms, got {_show(value)}")


def _optional_timestamp(value: Any) -> datetime | None:
    return None if value is None or value == "" else _timestamp(value)


def _day(value: Any) -> date:
    if isinstance(value, str):
        try:
            return date.fromisoformat(value.strip()[:10])
        except ValueError:
            pass
    raise _Bad(f"expected a day as YYYY-MM-DD, got {_show(value)}")


def _text(value: Any) -> str:
    if isinstance(value, str):
        return value
    raise _Bad(f"expected text, got {_show(value)}")


def _optional_text(value: Any) -> str | None:
    return None if value is None else _text(value)


def _boolean(value: Any) -> bool:
    if value is None:
        return False
    if isinstance(value, bool):
        return value
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    if isinstance(value, str) and value.strip().lower() in ("0", "1", "true", "false"):
        return value.strip().lower() in ("1", "true")
    raise _Bad(f"expected a boolean (0/1/true/false), got {_show(value)}")


def _json(value: Any) -> Any:
    if value is None:
        return None
    if isinstance(value, str):
        try:
            return json.loads(value)
        except json.JSONDecodeError:
            raise _Bad("expected JSON text, got something that does not parse") from None
    raise _Bad(f"expected JSON text, got {_show(value)}")


def _one_of(values: Sequence[str]) -> Callable[[Any], str]:
    def parse(value: Any) -> str:
        if isinstance(value, str) and value in values:
            return value
        raise _Bad(f"expected one of {', '.join(values)}, got {_show(value)}")

    return parse


def _show(value: Any) -> str:
    # Enough to find the row; never a whole message body in an error.
    shown = repr(value)
    return shown if len(shown) <= 40 else shown[:37] + "..."


# --- reading the SQLite file ---------------------------------------------------------------


Row = Mapping[str, Any]


def _field(table: str, number: int, row: Row, column: str, parse: Callable[[Any], Any]) -> Any:
    try:
        return parse(row.get(column))
    except _Bad as exc:
        raise ImportFailed(
            f"{table} row {number} (id={_show(row.get('id'))}): column {column}: {exc}"
        ) from None


def _message(n: int, row: Row) -> LegacyMessage:
    def f(column: str, parse: Callable[[Any], Any]) -> Any:
        return _field("messages", n, row, column, parse)

    return LegacyMessage(
        id=f("id", _snowflake),
        channel_id=f("channel_id", _snowflake),
        guild_id=f("guild_id", _optional_snowflake),
        author_id=f("author_id", _snowflake),
        author_name=f("author_name", _text),
        is_bot=f("is_bot", _boolean),
        content=f("content", _text),
        reply_to_id=f("reply_to_id", _optional_snowflake),
        created_at=f("created_at", _timestamp),
        edited_at=f("edited_at", _optional_timestamp),
        deleted_at=f("deleted_at", _optional_timestamp),
    )


def _memory(n: int, row: Row) -> LegacyMemory:
    def f(column: str, parse: Callable[[Any], Any]) -> Any:
        return _field("memories", n, row, column, parse)

    return LegacyMemory(
        id=f("id", _snowflake),
        user_id=f("user_id", _snowflake),
        content=f("content", _text),
        created_at=f("created_at", _timestamp),
        updated_at=f("updated_at", _timestamp),
    )


def _log_row(n: int, row: Row) -> LegacyLogRow:
    def f(column: str, parse: Callable[[Any], Any]) -> Any:
        return _field("memory_log", n, row, column, parse)

    return LegacyLogRow(
        id=f("id", _snowflake),
        memory_id=f("memory_id", _optional_snowflake),
        user_id=f("user_id", _snowflake),
        actor=f("actor", _one_of(ACTORS)),
        action=f("action", _one_of(ACTIONS)),
        reason=f("reason", _optional_text) or "",
        before=f("before", _json),
        after=f("after", _json),
        run_id=f("run_id", _optional_snowflake),
        created_at=f("created_at", _timestamp),
    )


def _signal(n: int, row: Row) -> LegacySignal:
    def f(column: str, parse: Callable[[Any], Any]) -> Any:
        return _field("signals", n, row, column, parse)

    return LegacySignal(
        id=f("id", _snowflake),
        message_id=f("message_id", _snowflake),
        user_id=f("user_id", _snowflake),
        kind=f("kind", _one_of(SIGNAL_KINDS)),
        value=f("value", _text),
        created_at=f("created_at", _timestamp),
    )


def _summary(value: Any) -> dict[str, Any]:
    parsed = _json(value)
    if parsed is None:
        return {}
    if not isinstance(parsed, dict):
        raise _Bad("expected a JSON object")
    return parsed


def _run(n: int, row: Row) -> LegacyRun:
    def f(column: str, parse: Callable[[Any], Any]) -> Any:
        return _field("nightly_runs", n, row, column, parse)

    return LegacyRun(
        id=f("id", _snowflake),
        day=f("day", _day),
        diary=f("diary", _optional_text),
        summary=f("summary", _summary),
        started_at=f("started_at", _timestamp),
        finished_at=f("finished_at", _optional_timestamp),
        rolled_back_at=f("rolled_back_at", _optional_timestamp),
    )


def _table_rows(conn: sqlite3.Connection, table: str) -> list[Row]:
    columns = [r[1] for r in conn.execute(f'PRAGMA table_info("{table}")')]
    if not columns:
        raise ImportFailed(f"the SQLite file has no table {table}")
    missing = [c for c in REQUIRED[table] if c not in columns]
    if missing:
        raise ImportFailed(f"table {table} lacks column(s): {', '.join(missing)}")
    cursor = conn.execute(f'SELECT * FROM "{table}"')
    names = [d[0] for d in cursor.description]
    return [dict(zip(names, values, strict=True)) for values in cursor]


def _unique_ids(table: str, ids: Iterable[int]) -> None:
    seen: set[int] = set()
    for ident in ids:
        if ident in seen:
            raise ImportFailed(f"{table}: id {ident} appears more than once")
        seen.add(ident)


def read_sqlite(path: Path) -> LegacyData:
    """Every row of the five tables, validated; ImportFailed names what is wrong."""
    if not path.is_file():
        raise ImportFailed(f"{path}: no such file")
    try:
        # Read-only: an import never changes the deployment it reads from.
        conn = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
    except sqlite3.Error as exc:
        raise ImportFailed(f"{path}: cannot open as SQLite ({exc})") from None
    try:
        rows = {table: _table_rows(conn, table) for table in TABLES}
    except sqlite3.Error as exc:
        raise ImportFailed(f"{path}: cannot read as SQLite ({exc})") from None
    finally:
        conn.close()
    data = LegacyData(
        messages=[_message(n, r) for n, r in enumerate(rows["messages"], 1)],
        memories=[_memory(n, r) for n, r in enumerate(rows["memories"], 1)],
        memory_log=[_log_row(n, r) for n, r in enumerate(rows["memory_log"], 1)],
        signals=[_signal(n, r) for n, r in enumerate(rows["signals"], 1)],
        nightly_runs=[_run(n, r) for n, r in enumerate(rows["nightly_runs"], 1)],
    )
    _check_consistency(data)
    return data


def _check_consistency(data: LegacyData) -> None:
    _unique_ids("messages", (m.id for m in data.messages))
    _unique_ids("memories", (m.id for m in data.memories))
    _unique_ids("memory_log", (r.id for r in data.memory_log))
    _unique_ids("signals", (s.id for s in data.signals))
    _unique_ids("nightly_runs", (r.id for r in data.nightly_runs))
    runs = {run.id for run in data.nightly_runs}
    for row in data.memory_log:
        if row.run_id is not None and row.run_id not in runs:
            raise ImportFailed(
                f"memory_log row id={row.id}: run_id {row.run_id} is not in nightly_runs"
            )
    live_days: set[date] = set()
    for run in data.nightly_runs:
        if run.rolled_back_at is None and run.day in live_days:
            raise ImportFailed(f"nightly_runs row id={run.id}: a second live run for {run.day}")
        if run.rolled_back_at is None:
            live_days.add(run.day)


def read_legacy_json(path: Path) -> tuple[list[LegacyEpisode], int]:
    """``{"<channel_id>": "memory string"}`` → one episode each; (episodes, blank strings)."""
    try:
        loaded = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ImportFailed(f"{path}: no such file") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ImportFailed(f"{path}: not a readable JSON file ({exc})") from None
    if not isinstance(loaded, dict):
        raise ImportFailed(f"{path}: expected an object of channel id -> memory string")
    episodes: list[LegacyEpisode] = []
    blank = 0
    for key, value in loaded.items():
        try:
            channel_id = _snowflake(key)
        except _Bad:
            raise ImportFailed(f"{path}: key {_show(key)} is not a channel id") from None
        if not isinstance(value, str):
            raise ImportFailed(f"{path}: channel {key}: expected a string, got {_show(value)}")
        if not value.strip():
            blank += 1
            continue
        episodes.append(LegacyEpisode(channel_id, value.strip()))
    return episodes, blank


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


def _ids(values: Iterable[int]) -> Any:
    # One array parameter, not one bind per id: a large export stays under asyncpg's limit.
    return any_(literal(sorted(set(values)), ARRAY(BigInteger)))


async def load_existing(session: AsyncSession, data: LegacyData) -> Existing:
    memory_ids = [m.id for m in data.memories]
    found = Existing()
    found.message_ids = set(
        await session.scalars(
            select(Message.id).where(Message.id == _ids(m.id for m in data.messages))
        )
    )
    owners = await session.execute(
        select(Memory.id, Memory.user_id).where(Memory.id == _ids(memory_ids))
    )
    found.memory_owners = {memory_id: user_id for memory_id, user_id in owners}
    found.memory_history = set(
        await session.scalars(
            select(MemoryLog.memory_id)
            .where(MemoryLog.memory_id == _ids(memory_ids))
            .where(or_(MemoryLog.trigger.is_(None), ~MemoryLog.trigger.startswith(TRIGGER_PREFIX)))
            .distinct()
        )
    )
    found.erased_users = set(
        await session.scalars(
            select(MemoryLog.user_id).where(MemoryLog.actor == ERASURE_ACTOR).distinct()
        )
    )
    found.signal_ids = set(
        await session.scalars(
            select(Signal.id).where(Signal.id == _ids(s.id for s in data.signals))
        )
    )
    keys = await session.execute(
        select(Signal.message_id, Signal.user_id, Signal.kind, Signal.value).where(
            Signal.message_id == _ids(s.message_id for s in data.signals)
        )
    )
    found.signal_keys = {(m, u, k, v) for m, u, k, v in keys}
    await _load_runs(session, data, found)
    found.log_keys = set(
        await session.scalars(
            select(MemoryLog.trigger).where(
                MemoryLog.trigger == any_(literal([r.key for r in data.memory_log], ARRAY(Text)))
            )
        )
    )
    episodes = await session.execute(
        select(Episode.channel_id, Episode.content).where(
            Episode.channel_id == _ids(e.channel_id for e in data.episodes)
        )
    )
    found.episodes = {(channel_id, content) for channel_id, content in episodes}
    return found


async def _load_runs(session: AsyncSession, data: LegacyData, found: Existing) -> None:
    days = sorted({run.day for run in data.nightly_runs})
    rows = await session.execute(
        select(
            NightlyRun.id, NightlyRun.day, NightlyRun.started_at, NightlyRun.rolled_back_at
        ).where(NightlyRun.day == any_(literal(days, ARRAY(Date))))
    )
    for run_id, day, started_at, rolled_back_at in rows:
        found.runs[(day, started_at)] = run_id
        if rolled_back_at is None:
            found.live_days.add(day)


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
    return MENTIONS_ERASED if names and mentions_any(episode.content, names) else None


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
    names: list[str] = []
    for user_id in sorted(erased):
        said = {m.author_name for m in messages if m.author_id == user_id}
        names.extend(erasure_names(user_id, said))
    return names


# --- applying the plan ---------------------------------------------------------------------


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


async def _insert(
    session: AsyncSession, plan: Plan, table: str, model: Any, rows: list[dict[str, Any]]
) -> None:
    """Insert the planned rows in batches; any that exist by now are counted as skipped."""
    if not rows:
        return
    statement = insert(model).on_conflict_do_nothing().returning(model.id)
    result = await session.execute(statement, rows)
    _settle(plan, table, len(result.all()))


def _settle(plan: Plan, table: str, inserted: int) -> None:
    # Rows that appeared between the plan and the insert (the bot is running) were skipped.
    count = plan.counts[table]
    count.skipped(PRESENT, count.insert - inserted)
    count.insert = inserted


async def _insert_runs(session: AsyncSession, plan: Plan) -> None:
    for run in plan.runs:
        row = NightlyRun(
            day=run.day,
            status="finished" if run.finished_at is not None else "failed",
            diary=run.diary,
            summary={**run.summary, "imported_from_run": run.id},
            started_at=run.started_at,
            finished_at=run.finished_at,
            rolled_back_at=run.rolled_back_at,
        )
        session.add(row)
        await session.flush()
        plan.run_ids[run.id] = row.id


async def _bump_sequence(session: AsyncSession, table: str) -> None:
    """Move the identity past the ids written by hand, never backwards (an id reused after a
    delete would confuse the ledger and the rollback)."""
    sequence = await session.scalar(text("SELECT pg_get_serial_sequence(:t, 'id')"), {"t": table})
    if sequence is None:
        return
    state = (await session.execute(text(f"SELECT last_value, is_called FROM {sequence}"))).one()
    used = state.last_value if state.is_called else state.last_value - 1
    highest = await session.scalar(text(f'SELECT coalesce(max(id), 0) FROM "{table}"'))
    target = max(int(used), int(highest or 0))
    if target > 0:
        await session.execute(text("SELECT setval(:s, :v, true)"), {"s": sequence, "v": target})


async def apply_plan(session: AsyncSession, plan: Plan) -> None:
    await _insert_runs(session, plan)
    await _insert(session, plan, "messages", Message, [asdict(m) for m in plan.messages])
    memories = [asdict(m) | {"source": SOURCE} for m in plan.memories]
    await _insert(session, plan, "memories", Memory, memories)
    await _insert(session, plan, "signals", Signal, [asdict(s) for s in plan.signals])
    await _insert(
        session, plan, "memory_log", MemoryLog, [_log_values(plan, r) for r in plan.memory_log]
    )
    episodes = [{"channel_id": e.channel_id, "content": e.content} for e in plan.episodes]
    await _insert(session, plan, "episodes", Episode, episodes)
    await _bump_sequence(session, "memories")
    await _bump_sequence(session, "signals")


def _log_values(plan: Plan, row: LegacyLogRow) -> dict[str, Any]:
    # A new ledger id; the legacy id lives on in `trigger`, the import's de-duplication key.
    values = asdict(row)
    values.pop("id")
    values["run_id"] = plan.run_ids[row.run_id] if row.run_id is not None else None
    values["trigger"] = row.key
    return values


# --- the entry point -----------------------------------------------------------------------


def read_inputs(sqlite_path: Path | None, legacy_json: Path | None) -> LegacyData:
    if sqlite_path is None and legacy_json is None:
        raise ImportFailed("nothing to import: give --sqlite and/or --legacy-json")
    data = read_sqlite(sqlite_path) if sqlite_path is not None else LegacyData()
    if legacy_json is not None:
        data.episodes, data.empty_episodes = read_legacy_json(legacy_json)
    return data


async def import_legacy(
    sessions: SessionFactory,
    *,
    sqlite_path: Path | None,
    legacy_json: Path | None = None,
    dry_run: bool = False,
) -> ImportReport:
    """Validate everything, then insert what is new in one transaction (or only report it)."""
    data = read_inputs(sqlite_path, legacy_json)
    async with sessions() as session, session.begin():
        # Two imports at once would both plan the same rows; the second waits and skips them.
        await xact_lock(session, LOCK_NAMESPACE, 0)
        plan = plan_import(data, await load_existing(session, data))
        if dry_run:
            await session.rollback()
            return ImportReport(True, plan.counts)
        await apply_plan(session, plan)
    return ImportReport(False, plan.counts)
