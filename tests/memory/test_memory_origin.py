"""A memory's origin: the pure narrowing rule, and the migration that backfills origins and
sources of memories from before they were recorded (run on a database of its own)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from datetime import UTC, datetime

import asyncpg
import pytest
from alembic.config import Config

from alembic import command
from app.channel.exchange import DM, Place
from app.memory.records import ANY, DM_ONLY, UNKNOWN, Origin
from tests.conftest import DB_NAME, PG_HOST, PG_PORT, PG_USER

A, B = Place(500), Place(600)


@pytest.mark.parametrize(
    ("start", "place", "result"),
    [
        (ANY, A, Origin("guild", 500)),  # a row written by hand takes the first real origin
        (ANY, DM, DM_ONLY),
        (ANY, None, UNKNOWN),
        (Origin("guild", 500), A, Origin("guild", 500)),  # the same guild keeps it
        (Origin("guild", 500), B, DM_ONLY),  # two guilds: only the owner's DMs hold both
        (Origin("guild", 500), DM, DM_ONLY),  # what was said in a DM stays out of guilds
        (DM_ONLY, A, DM_ONLY),  # never widened back
        (UNKNOWN, A, UNKNOWN),
        (Origin("guild", 500), None, UNKNOWN),
    ],
)
def test_learning_more_somewhere_narrows_the_origin_never_widens_it(
    start: Origin, place: Place | None, result: Origin
) -> None:
    assert start.narrowed_by(place) == result


@pytest.mark.parametrize(
    ("origin", "visible"),
    [
        (Origin("guild", 500), {"A": True, "B": False, "DM": True}),
        (DM_ONLY, {"A": False, "B": False, "DM": True}),
        (UNKNOWN, {"A": False, "B": False, "DM": True}),
        (ANY, {"A": True, "B": True, "DM": True}),
    ],
)
def test_where_each_origin_may_surface(origin: Origin, visible: dict[str, bool]) -> None:
    places = {"A": A, "B": B, "DM": DM}
    assert {name: origin.visible_in(place) for name, place in places.items()} == visible


MIGRATION_DB = f"{DB_NAME}_origin_migration"
T0 = datetime(2026, 11, 20, 12, tzinfo=UTC)


def _alembic(revision: str) -> None:
    config = Config("alembic.ini")
    config.set_main_option(
        "sqlalchemy.url", f"postgresql+asyncpg://{PG_USER}@{PG_HOST}:{PG_PORT}/{MIGRATION_DB}"
    )
    config.attributes["configure_logger"] = False
    command.upgrade(config, revision)


async def _admin(sql: str) -> None:
    conn = await asyncpg.connect(host=PG_HOST, port=PG_PORT, user=PG_USER, database="postgres")
    try:
        await conn.execute(sql)
    finally:
        await conn.close()


@pytest.fixture
def at_0004() -> Iterator[str]:
    asyncio.run(_admin(f'DROP DATABASE IF EXISTS "{MIGRATION_DB}" WITH (FORCE)'))
    asyncio.run(_admin(f'CREATE DATABASE "{MIGRATION_DB}"'))
    _alembic("0004")
    yield f"postgresql://{PG_USER}@{PG_HOST}:{PG_PORT}/{MIGRATION_DB}"
    asyncio.run(_admin(f'DROP DATABASE IF EXISTS "{MIGRATION_DB}" WITH (FORCE)'))


SEED = """
INSERT INTO messages (id, channel_id, guild_id, author_id, author_name, content, created_at)
VALUES (101, 30, 500, 11, 'Alice', 'I like tea', $1),
       (102, 90, NULL, 11, 'Alice', 'a secret', $1),
       (103, 31, 600, 11, 'Alice', 'I knit', $1),
       (104, 30, 500, 22, 'Bob', 'I run', $1);
INSERT INTO nightly_runs (id, day, window_start, window_end, status)
VALUES (7, '2026-11-21', $1 - interval '1 hour', $1 + interval '1 hour', 'finished');
INSERT INTO memories (id, user_id, content) VALUES
    (1, 11, 'likes tea'), (2, 11, 'a secret'), (3, 11, 'tea and knitting'),
    (4, 22, 'runs'), (5, 11, 'imported'), (6, 11, 'never logged');
INSERT INTO memory_log (memory_id, user_id, actor, action, after, trigger, run_id) VALUES
    (1, 11, 'extraction', 'add', '{}', 'reply:101', NULL),
    (2, 11, 'extraction', 'add', '{}', 'reply:102', NULL),
    (3, 11, 'extraction', 'add', '{}', 'reply:101', NULL),
    (3, 11, 'extraction', 'update', '{}', 'reply:103', NULL),
    (4, 22, 'nightly', 'add', '{}', 'nightly:7:22:0', 7),
    (5, 11, 'extraction', 'add', '{}', 'import:memory_log:9', NULL);
"""


def test_the_migration_backfills_origins_narrowly_and_privately(at_0004: str) -> None:
    async def run() -> dict[int, tuple[str, int | None]]:
        conn = await asyncpg.connect(at_0004)
        try:
            await conn.execute(SEED.replace("$1", f"'{T0.isoformat()}'::timestamptz"))
        finally:
            await conn.close()
        await asyncio.to_thread(_alembic, "0005")
        conn = await asyncpg.connect(at_0004)
        try:
            rows = await conn.fetch("SELECT id, origin, origin_guild_id FROM memories")
            sources = await conn.fetch("SELECT memory_id, message_id FROM memory_sources")
        finally:
            await conn.close()
        assert sorted((r["memory_id"], r["message_id"]) for r in sources) == [
            (1, 101),
            (2, 102),
            (3, 101),
            (3, 103),
        ]
        return {r["id"]: (r["origin"], r["origin_guild_id"]) for r in rows}

    origins = asyncio.run(run())

    assert origins == {
        1: ("guild", 500),  # a reply in guild 500
        2: ("dm", None),  # a reply in a DM
        3: ("dm", None),  # learned in two guilds: only the owner's DMs hold both
        4: ("guild", 500),  # a nightly chunk: all of Bob's messages that night were in 500
        5: ("unknown", None),  # imported: nothing says where
        6: ("unknown", None),  # no ledger at all
    }


def test_a_row_written_by_hand_after_the_migration_has_no_origin(database_url: str) -> None:
    async def run() -> str:
        conn = await asyncpg.connect(database_url.replace("+asyncpg", ""))
        try:
            await conn.execute("TRUNCATE memories")
            await conn.execute("INSERT INTO memories (user_id, content) VALUES (1, 'x')")
            return str(await conn.fetchval("SELECT origin FROM memories"))
        finally:
            await conn.close()

    assert asyncio.run(run()) == "any"
