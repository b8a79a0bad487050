"""MEM-08, reading: the original bot's SQLite database and its legacy per-channel memory
strings, every row validated into plain dataclasses before anything is written.

``ImportFailed`` names the file, table, row and column of the first bad value."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

from app.vocabulary import Action, Actor

TRIGGER_PREFIX = "import:"
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
    # Where it was learned, when the export says so (optional columns ``guild_id``, or
    # ``origin`` = "dm"); otherwise unknown, which keeps it to its owner's DMs.
    origin: str = "unknown"
    origin_guild_id: int | None = None


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

    guild = f("guild_id", _optional_snowflake)
    said_in_dm = f("origin", _optional_text) == "dm"
    return LegacyMemory(
        id=f("id", _snowflake),
        user_id=f("user_id", _snowflake),
        content=f("content", _text),
        created_at=f("created_at", _timestamp),
        updated_at=f("updated_at", _timestamp),
        origin="guild" if guild is not None else "dm" if said_in_dm else "unknown",
        origin_guild_id=guild,
    )


def _log_row(n: int, row: Row) -> LegacyLogRow:
    def f(column: str, parse: Callable[[Any], Any]) -> Any:
        return _field("memory_log", n, row, column, parse)

    return LegacyLogRow(
        id=f("id", _snowflake),
        memory_id=f("memory_id", _optional_snowflake),
        user_id=f("user_id", _snowflake),
        actor=f("actor", _one_of(tuple(Actor))),
        action=f("action", _one_of(tuple(Action))),
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


def read_inputs(sqlite_path: Path | None, legacy_json: Path | None) -> LegacyData:
    if sqlite_path is None and legacy_json is None:
        raise ImportFailed("nothing to import: give --sqlite and/or --legacy-json")
    data = read_sqlite(sqlite_path) if sqlite_path is not None else LegacyData()
    if legacy_json is not None:
        data.episodes, data.empty_episodes = read_legacy_json(legacy_json)
    return data
