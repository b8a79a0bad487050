"""MEM-08: `python -m app import` loads the original bot's SQLite database and legacy
per-channel memory strings — every table, idempotently, with a dry run and clear errors."""

from __future__ import annotations

import asyncio
import json
import sqlite3
import sys
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select, text

from app.config import Settings
from app.db import SessionFactory, unit_of_work
from app.memory import store
from app.memory.records import Why
from app.memory.rollback import rollback_run
from app.models import Base
from app.models.memory import Memory, MemoryLog
from app.models.messages import Message
from app.models.nightly import NightlyRun
from app.models.signals import Signal
from app.models.structured import Episode
from app.ops.import_plan import HISTORY
from app.ops.importer import import_legacy
from app.ops.legacy import ImportFailed
from app.vocabulary import Actor
from tests.support.erasure import erase_now
from tests.support.memory_env import memory_env

ALICE, BOB, BOT = 42, 43, 1000
MS = 1_767_323_045_000  # 2026-01-02T03:04:05Z in epoch milliseconds
AT = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)

SCHEMA = """
CREATE TABLE messages (id, channel_id, guild_id, author_id, author_name, is_bot, content,
                       created_at, edited_at, deleted_at);
CREATE TABLE memories (id INTEGER PRIMARY KEY, user_id, content, created_at, updated_at);
CREATE TABLE memory_log (id INTEGER PRIMARY KEY, memory_id, user_id, actor, action, reason,
                         before, after, run_id, created_at);
CREATE TABLE signals (id INTEGER PRIMARY KEY, message_id, user_id, kind, value, created_at);
CREATE TABLE nightly_runs (id INTEGER PRIMARY KEY, day, diary, summary, started_at,
                           finished_at, rolled_back_at);
"""
HIKING = {"id": 1, "user_id": "42", "content": "Loves hiking"}
ROWS: dict[str, list[tuple[Any, ...]]] = {
    "messages": [
        (1001, "500", 1, 42, "Alice", 0, "I love hiking", "2026-01-02T03:04:05Z", None, None),
        ("1002", 500, None, "1000", "companion", 1, "Nice!", MS, MS + 1000, None),
        (
            1003,
            500,
            "1",
            43,
            "Bob",
            "false",
            "I'm Bob",
            "2026-01-02 03:05:00",
            None,
            "2026-01-03T00:00:00+09:00",
        ),
    ],
    "memories": [
        (1, 42, "Loves hiking", "2026-01-02T03:04:05Z", "2026-01-05T00:00:00Z"),
        (7, "43", "Is called Bob", MS, str(MS)),
    ],
    "memory_log": [
        (1, 1, 42, "nightly", "add", "nightly", None, json.dumps(HIKING), 1, MS),
        (2, None, "42", "reply", "read", "", None, "[1]", None, MS),
        (
            3,
            5,
            42,
            "command",
            "delete",
            "!memory forget",
            '{"id": 5, "content": "old"}',
            None,
            None,
            "2026-01-02T04:00:00Z",
        ),
    ],
    "signals": [
        (1, 1002, 42, "reaction", "👍", MS),
        (2, "1002", "43", "correction", "that's wrong", "2026-01-02T03:06:00Z"),
    ],
    "nightly_runs": [
        (
            1,
            "2026-01-02",
            "日記",
            '{"added": [1], "updated": [], "deleted": [], "decayed": []}',
            "2026-01-02T18:00:00Z",
            "2026-01-02T18:01:00Z",
            None,
        ),
        (2, "2026-01-01", None, None, "2026-01-01T18:00:00Z", None, "2026-01-01T19:00:00Z"),
    ],
}
LEGACY = {"500": "The channel likes hiking", "501": "  ", "502": "Movie night is on Fridays"}


def build_sqlite(
    path: Path, *, skip_table: str | None = None, rows: dict[str, list[tuple[Any, ...]]] = ROWS
) -> Path:
    with sqlite3.connect(path) as conn:
        for statement in SCHEMA.split(";"):
            if statement.strip() and f"TABLE {skip_table} " not in statement:
                conn.execute(statement)
        for table, values in rows.items():
            if table != skip_table:
                marks = ", ".join("?" * len(values[0]))
                conn.executemany(f"INSERT INTO {table} VALUES ({marks})", values)
    conn.close()
    return path


@pytest.fixture
def legacy(tmp_path: Path) -> tuple[Path, Path]:
    json_path = tmp_path / "legacy.json"
    json_path.write_text(json.dumps(LEGACY), encoding="utf-8")
    return build_sqlite(tmp_path / "bot.sqlite"), json_path


async def snapshot(sessions: SessionFactory) -> dict[str, list[str]]:
    """Every row of every table as JSON text, sorted (what "nothing changed" compares)."""
    out: dict[str, list[str]] = {}
    async with sessions() as session:
        for table in Base.metadata.sorted_tables:
            rows = await session.execute(text(f'SELECT row_to_json(t)::text FROM "{table.name}" t'))
            out[table.name] = sorted(row[0] for row in rows)
    return out


async def rows_of(sessions: SessionFactory, model: type[Base]) -> list[Any]:
    async with sessions() as session:
        return list((await session.scalars(select(model).order_by(model.id))).all())  # type: ignore[attr-defined]


def inserted(report: Any) -> dict[str, int]:
    return {table: count.insert for table, count in report.tables.items()}


EVERYTHING = {
    "messages": 3,
    "memories": 2,
    "memory_log": 3,
    "signals": 2,
    "nightly_runs": 2,
    "episodes": 2,
}


async def test_mem08_import_loads_every_table(
    sessions: SessionFactory, legacy: tuple[Path, Path]
) -> None:
    sqlite_path, json_path = legacy

    report = await import_legacy(sessions, sqlite_path=sqlite_path, legacy_json=json_path)

    assert inserted(report) == EVERYTHING
    assert report.tables["episodes"].skip == {"blank string": 1}
    messages = {m.id: m for m in await rows_of(sessions, Message)}
    assert sorted(messages) == [1001, 1002, 1003]
    assert (messages[1001].channel_id, messages[1001].author_id, messages[1001].content) == (
        500,
        ALICE,
        "I love hiking",
    )
    assert messages[1001].created_at == AT and messages[1002].created_at == AT
    assert messages[1002].is_bot and messages[1002].guild_id is None
    assert messages[1002].edited_at == datetime(2026, 1, 2, 3, 4, 6, tzinfo=UTC)
    assert not messages[1003].is_bot
    assert messages[1003].deleted_at == datetime(2026, 1, 2, 15, 0, tzinfo=UTC)
    memories = await rows_of(sessions, Memory)
    assert [(m.id, m.user_id, m.content, m.source) for m in memories] == [
        (1, ALICE, "Loves hiking", "import"),
        (7, BOB, "Is called Bob", "import"),
    ]
    assert memories[0].updated_at == datetime(2026, 1, 5, tzinfo=UTC)
    assert memories[1].created_at == AT == memories[1].updated_at
    runs = await rows_of(sessions, NightlyRun)
    assert [(r.day, r.status, r.diary) for r in runs] == [
        (date(2026, 1, 2), "finished", "日記"),
        (date(2026, 1, 1), "failed", None),
    ]
    assert runs[0].summary["added"] == [1] and runs[1].rolled_back_at is not None
    log = await rows_of(sessions, MemoryLog)
    assert [(r.memory_id, r.user_id, r.actor, r.action, r.run_id, r.trigger) for r in log] == [
        (1, ALICE, "nightly", "add", runs[0].id, "import:memory_log:1"),
        (None, ALICE, "reply", "read", None, "import:memory_log:2"),
        (5, ALICE, "command", "delete", None, "import:memory_log:3"),
    ]
    assert log[0].after == HIKING and log[1].after == [1] and log[2].before["content"] == "old"
    signals = await rows_of(sessions, Signal)
    assert [(s.id, s.message_id, s.user_id, s.kind, s.value) for s in signals] == [
        (1, 1002, ALICE, "reaction", "👍"),
        (2, 1002, BOB, "correction", "that's wrong"),
    ]
    episodes = await rows_of(sessions, Episode)
    assert sorted((e.channel_id, e.content) for e in episodes) == [
        (500, "The channel likes hiking"),
        (502, "Movie night is on Fridays"),
    ]


async def test_mem08_new_rows_after_an_import_get_fresh_ids(
    sessions: SessionFactory, legacy: tuple[Path, Path]
) -> None:
    await import_legacy(sessions, sqlite_path=legacy[0])

    async with unit_of_work(sessions) as session:
        memory = await store.add(
            session, ALICE, "New fact", Why(Actor.COMMAND, "test"), learned_in=None
        )
        signal = Signal(message_id=1, user_id=ALICE, kind="reaction", value="🎉")
        session.add(signal)
        await session.flush()
    assert memory.id == 8 and signal.id == 3


async def test_mem08_a_second_import_changes_nothing(
    sessions: SessionFactory, legacy: tuple[Path, Path]
) -> None:
    sqlite_path, json_path = legacy
    await import_legacy(sessions, sqlite_path=sqlite_path, legacy_json=json_path)
    first = await snapshot(sessions)

    again = await import_legacy(sessions, sqlite_path=sqlite_path, legacy_json=json_path)

    assert inserted(again) == dict.fromkeys(EVERYTHING, 0)
    assert again.tables["memories"].skip == {"already present": 2}
    assert await snapshot(sessions) == first


async def test_mem08_a_memory_deleted_after_the_import_is_not_brought_back(
    sessions: SessionFactory, legacy: tuple[Path, Path]
) -> None:
    await import_legacy(sessions, sqlite_path=legacy[0])
    async with unit_of_work(sessions) as session:  # as `!memory forget` does it
        gone = await store.delete_one(session, 1, Why(Actor.COMMAND, "!memory forget"), owner=ALICE)
        assert gone is not None

    again = await import_legacy(sessions, sqlite_path=legacy[0])

    assert again.tables["memories"].insert == 0
    assert again.tables["memories"].skip == {"already present": 1, HISTORY: 1}
    assert [m.id for m in await rows_of(sessions, Memory)] == [7]


async def test_mem08_dry_run_reports_the_counts_and_writes_nothing(
    sessions: SessionFactory, legacy: tuple[Path, Path]
) -> None:
    sqlite_path, json_path = legacy
    empty = await snapshot(sessions)

    report = await import_legacy(
        sessions, sqlite_path=sqlite_path, legacy_json=json_path, dry_run=True
    )

    assert report.dry_run and inserted(report) == EVERYTHING
    assert "would insert 3" in report.render()
    assert await snapshot(sessions) == empty
    async with unit_of_work(sessions) as session:  # not even the id sequences moved
        memory = await store.add(session, ALICE, "x", Why(Actor.COMMAND, "test"), learned_in=None)
    assert memory.id == 1


async def test_mem08_imported_nightly_runs_can_be_rolled_back(
    sessions: SessionFactory, legacy: tuple[Path, Path]
) -> None:
    await import_legacy(sessions, sqlite_path=legacy[0])
    run = (await rows_of(sessions, NightlyRun))[0]

    result = await rollback_run(sessions, run.id, dry_run=False)

    assert result.plan.deleted == [1]
    assert [m.id for m in await rows_of(sessions, Memory)] == [7]


async def test_mem08_people_who_used_forgetme_are_not_brought_back(
    settings: Settings, sessions: SessionFactory, tmp_path: Path
) -> None:
    async with memory_env(settings, sessions) as env:
        await erase_now(env.services, ALICE)
    json_path = tmp_path / "legacy.json"
    # Her name there is distinctive ("Alice" alone is a common word, which names no one).
    summaries = {"500": "Alice Quokka organised the hike", "502": "Bob sings"}
    json_path.write_text(json.dumps(summaries))
    first, *rest = ROWS["messages"]
    named = {**ROWS, "messages": [(*first[:4], "Alice Quokka", *first[5:]), *rest]}

    report = await import_legacy(
        sessions, sqlite_path=build_sqlite(tmp_path / "b.sqlite", rows=named), legacy_json=json_path
    )

    assert inserted(report) == {
        "messages": 2,
        "memories": 1,
        "memory_log": 0,
        "signals": 1,
        "nightly_runs": 2,
        "episodes": 1,
    }
    assert report.tables["memories"].skip == {"person used !forgetme": 1}
    async with sessions() as session:
        assert await session.scalar(select(Message.id).where(Message.author_id == ALICE)) is None
        assert list(await session.scalars(select(Episode.content))) == ["Bob sings"]


@pytest.mark.parametrize(
    ("broken", "error"),
    [
        ({"skip_table": "signals"}, "no table signals"),
        (
            {"rows": {**ROWS, "memories": [*ROWS["memories"], (9, "abc", "x", MS, MS)]}},
            "memories row 3 (id=9): column user_id: expected an id",
        ),
        (
            {
                "rows": {
                    **ROWS,
                    "messages": [
                        *ROWS["messages"],
                        (1004, 500, 1, 42, "A", 0, "hi", "yesterday", None, None),
                    ],
                }
            },
            "messages row 4 (id=1004): column created_at",
        ),
        (
            {
                "rows": {
                    **ROWS,
                    "memory_log": [
                        *ROWS["memory_log"],
                        (4, 1, 42, "robot", "add", "", None, None, None, MS),
                    ],
                }
            },
            "memory_log row 4 (id=4): column actor",
        ),
        (
            {
                "rows": {
                    **ROWS,
                    "memory_log": [
                        *ROWS["memory_log"],
                        (4, 1, 42, "nightly", "add", "", None, None, 99, MS),
                    ],
                }
            },
            "memory_log row id=4: run_id 99 is not in nightly_runs",
        ),
        (
            {"rows": {**ROWS, "signals": [*ROWS["signals"], (3, 1, 42, "reaction", "x", "soon")]}},
            "signals row 3 (id=3): column created_at",
        ),
    ],
)
async def test_mem08_a_malformed_file_is_a_clear_error_and_nothing_is_written(
    sessions: SessionFactory, tmp_path: Path, broken: dict[str, Any], error: str
) -> None:
    sqlite_path = build_sqlite(tmp_path / "bad.sqlite", **broken)
    empty = await snapshot(sessions)

    with pytest.raises(ImportFailed) as failure:
        await import_legacy(sessions, sqlite_path=sqlite_path)

    assert error in str(failure.value)
    assert await snapshot(sessions) == empty


async def test_mem08_a_file_that_is_not_sqlite_is_a_clear_error(
    sessions: SessionFactory, tmp_path: Path
) -> None:
    not_sqlite = tmp_path / "notes #1.sqlite"
    not_sqlite.write_text("just some text, definitely not a database\n" * 100)

    with pytest.raises(ImportFailed, match="cannot read as SQLite"):
        await import_legacy(sessions, sqlite_path=not_sqlite)
    with pytest.raises(ImportFailed, match="no such file"):
        await import_legacy(sessions, sqlite_path=tmp_path / "missing.sqlite")


async def test_mem08_bad_legacy_json_is_a_clear_error_and_nothing_is_written(
    sessions: SessionFactory, legacy: tuple[Path, Path], tmp_path: Path
) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"500": "fine", "general": "not an id"}))
    empty = await snapshot(sessions)

    with pytest.raises(ImportFailed, match="key 'general' is not a channel id"):
        await import_legacy(sessions, sqlite_path=legacy[0], legacy_json=bad)

    assert await snapshot(sessions) == empty


async def test_mem08_a_clash_with_this_databases_own_data_is_an_error_and_writes_nothing(
    sessions: SessionFactory, legacy: tuple[Path, Path]
) -> None:
    async with unit_of_work(sessions) as session:
        session.add(Memory(id=7, user_id=999, content="someone else's"))
    before = await snapshot(sessions)

    with pytest.raises(ImportFailed, match="memories row id=7: that id belongs to another"):
        await import_legacy(sessions, sqlite_path=legacy[0])

    assert await snapshot(sessions) == before


async def run_cli(database_url: str, *args: str) -> tuple[int, str, str]:
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "app",
        "import",
        *args,
        env={"DATABASE_URL": database_url, "PATH": "/usr/bin:/bin"},
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(process.communicate(), timeout=60)
    return process.returncode or 0, out.decode(), err.decode()


async def test_mem08_the_cli_imports_with_only_database_url_set(
    sessions: SessionFactory, database_url: str, legacy: tuple[Path, Path], tmp_path: Path
) -> None:
    sqlite_path, json_path = legacy

    code, out, _ = await run_cli(
        database_url, "--sqlite", str(sqlite_path), "--legacy-json", str(json_path), "--dry-run"
    )
    assert code == 0 and "Dry run" in out and "messages: would insert 3" in out
    assert await rows_of(sessions, Message) == []

    code, out, _ = await run_cli(database_url, "--sqlite", str(sqlite_path))
    assert code == 0 and "messages: inserted 3" in out
    assert len(await rows_of(sessions, Message)) == 3

    bad = build_sqlite(tmp_path / "bad.sqlite", skip_table="nightly_runs")
    code, _, err = await run_cli(database_url, "--sqlite", str(bad))
    assert code == 2 and "no table nightly_runs" in err and "nothing was written" in err


async def test_mem08_imported_memories_are_private_unless_the_export_says_where(
    sessions: SessionFactory, tmp_path: Path
) -> None:
    """Nothing in the original bot's export says where a memory was learned, so imported
    memories stay in their owners' DMs; an export with a guild_id column keeps it."""
    plain = build_sqlite(tmp_path / "plain.sqlite")
    await import_legacy(sessions, sqlite_path=plain)
    assert {(m.id, m.origin, m.origin_guild_id) for m in await rows_of(sessions, Memory)} == {
        (1, "unknown", None),
        (7, "unknown", None),
    }

    with_guild = tmp_path / "with_guild.sqlite"
    build_sqlite(with_guild)
    with sqlite3.connect(with_guild) as conn:
        conn.execute("ALTER TABLE memories ADD COLUMN guild_id")
        conn.execute("ALTER TABLE memories ADD COLUMN origin")
        conn.execute("UPDATE memories SET id = id + 100")
        conn.execute("UPDATE memories SET guild_id = '777' WHERE id = 101")
        conn.execute("UPDATE memories SET origin = 'dm' WHERE id = 107")
        conn.execute("DELETE FROM memory_log")
    conn.close()
    await import_legacy(sessions, sqlite_path=with_guild)
    origins = {m.id: (m.origin, m.origin_guild_id) for m in await rows_of(sessions, Memory)}
    assert origins[101] == ("guild", 777) and origins[107] == ("dm", None)
