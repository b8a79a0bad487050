"""Postgres through PgBouncer in transaction mode (one server connection shared by every
client): with DATABASE_TRANSACTION_POOLING the core flow runs as on a direct connection, and
so do the migrations and wait-for-schema; the bot's advisory locks are all transaction-scoped."""

from __future__ import annotations

import ast
import asyncio
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from app.config import Settings
from app.db import SessionFactory
from app.ops.schema import load_migrations, wait_for_schema
from tests.conftest import DB_NAME, PG_HOST, PG_PORT, PG_USER, run_migrations
from tests.support.core_flow import FACT, REPLY, run_core_flow
from tests.support.proxies import PGBOUNCER, PrivatePgBouncer
from tests.support.stack import running_stack

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.skipif(PGBOUNCER is None, reason="pgbouncer is not installed")


@pytest.fixture(scope="module")
def pgbouncer() -> Iterator[PrivatePgBouncer]:
    bouncer = PrivatePgBouncer(PG_HOST, PG_PORT, PG_USER)
    bouncer.start()
    try:
        yield bouncer
    finally:
        bouncer.close()


async def test_the_core_flow_runs_through_pgbouncer_in_transaction_mode(
    settings: Settings,
    sessions: SessionFactory,
    redis: object,
    pgbouncer: PrivatePgBouncer,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    pooled = settings.model_copy(
        update={"database_url": pgbouncer.url(DB_NAME), "database_transaction_pooling": True}
    )
    async with running_stack(pooled, monkeypatch) as stack:
        flow = await run_core_flow(stack, sessions)
    assert flow.replies == [REPLY] and flow.reactions == 1
    assert flow.memories == [FACT]
    assert flow.night["status"] == "finished", flow.night
    assert "prepared statement" not in pgbouncer.log.read_text()


def test_migrations_and_wait_for_schema_run_through_pgbouncer(
    database_url: str, pgbouncer: PrivatePgBouncer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DATABASE_TRANSACTION_POOLING", "true")
    run_migrations(pgbouncer.url(DB_NAME))  # at head already: alembic still reads the schema
    migrations = load_migrations(ROOT / "alembic.ini")
    waited = wait_for_schema(pgbouncer.url(DB_NAME), migrations, timeout_s=5)
    assert asyncio.run(waited)


def sql_strings(path: Path) -> list[str]:
    """The string literals of a module, its docstrings left out (they name functions, not
    call them)."""
    tree = ast.parse(path.read_text())
    docstrings = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
        and node.body
        and isinstance(node.body[0], ast.Expr)
    }
    return [
        node.value
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and id(node) not in docstrings
    ]


def test_every_advisory_lock_the_bot_takes_is_transaction_scoped() -> None:
    """A session-level lock (pg_advisory_lock) would outlive its transaction on a pooled
    server connection: held for, or released by, whoever gets that connection next. The
    migrations count too: a function they create takes its locks in the caller's session."""
    taken = [
        (path.relative_to(ROOT).as_posix(), call)
        for folder in ("app", "alembic")
        for path in (ROOT / folder).rglob("*.py")
        for literal in sql_strings(path)
        for call in re.findall(r"pg_(?:try_)?advisory_[a-z_]*lock[a-z_]*", literal)
    ]
    assert {call for _, call in taken} >= {"pg_advisory_xact_lock", "pg_try_advisory_xact_lock"}
    assert [(path, call) for path, call in taken if "_xact_" not in call] == []
