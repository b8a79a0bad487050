"""`python -m app wait-for-schema`: ready once the database is at this release's migration
head, or at a revision it does not know (a newer release migrated it during a rolling
update); waiting, then exit 1, while no migration has run or an older one is the latest."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import asyncpg
import pytest

from app.ops.schema import Migrations, SchemaState, judge, load_migrations
from tests.conftest import DB_NAME, PG_HOST, PG_PORT, PG_USER

ROOT = Path(__file__).resolve().parents[2]
MIGRATIONS = Migrations(heads=frozenset({"0007"}), known=frozenset({"0001", "0006", "0007"}))


@pytest.mark.parametrize(
    ("current", "state"),
    [
        (set(), SchemaState.MISSING),
        ({"0006"}, SchemaState.BEHIND),
        ({"0007"}, SchemaState.AT_HEAD),
        ({"0008_newer_release"}, SchemaState.AHEAD),
    ],
)
def test_the_schema_state_from_the_recorded_revisions(
    current: set[str], state: SchemaState
) -> None:
    assert judge(frozenset(current), MIGRATIONS) is state
    assert state.ready == (state in (SchemaState.AT_HEAD, SchemaState.AHEAD))


def test_this_releases_migrations_have_one_head() -> None:
    migrations = load_migrations(ROOT / "alembic.ini")
    assert len(migrations.heads) == 1 and migrations.heads <= migrations.known


def wait(database: str, timeout: str) -> subprocess.CompletedProcess[str]:
    env = {
        "PATH": "/usr/bin:/bin",
        "DATABASE_URL": f"postgresql+asyncpg://{PG_USER}@{PG_HOST}:{PG_PORT}/{database}",
    }
    return subprocess.run(
        [sys.executable, "-m", "app", "wait-for-schema", "--timeout", timeout],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.fixture
def empty_database() -> Iterator[str]:
    name = f"{DB_NAME}_unmigrated"

    async def run(statement: str) -> None:
        conn = await asyncpg.connect(host=PG_HOST, port=PG_PORT, user=PG_USER, database="postgres")
        try:
            await conn.execute(statement)
        finally:
            await conn.close()

    asyncio.run(run(f'DROP DATABASE IF EXISTS "{name}"'))
    asyncio.run(run(f'CREATE DATABASE "{name}"'))
    try:
        yield name
    finally:
        asyncio.run(run(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))


def test_a_migrated_database_is_ready_at_once(database_url: str) -> None:
    result = wait(DB_NAME, "10")
    assert result.returncode == 0, result.stdout + result.stderr


def test_an_unmigrated_database_is_waited_for_then_given_up(empty_database: str) -> None:
    result = wait(empty_database, "1")
    assert result.returncode == 1
    assert "schema missing" in result.stdout + result.stderr
    assert "did not reach this release's head within 1 s" in result.stdout
