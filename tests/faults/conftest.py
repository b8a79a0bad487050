"""Fault-suite fixtures: a private Postgres cluster and a private Redis started once per
session (the tests crash and restart them), fresh tables and an empty queue per test."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path

import asyncpg
import pytest
from redis.asyncio import Redis

from app.config import Settings
from app.db import SessionFactory, create_engine, create_session_factory
from app.models import Base
from tests.conftest import run_migrations
from tests.faults.harness import REPORTS
from tests.faults.services import PrivatePostgres, PrivateRedis, missing_binaries

DATABASE = "bot_fault_private"


@dataclass
class Private:
    postgres: PrivatePostgres
    redis: PrivateRedis

    @property
    def database_url(self) -> str:
        return self.postgres.url(DATABASE)


async def _create_database(postgres: PrivatePostgres) -> None:
    conn = await asyncpg.connect(host="127.0.0.1", port=postgres.port, user="postgres")
    try:
        await conn.execute(f'CREATE DATABASE "{DATABASE}"')
    finally:
        await conn.close()


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """Show what each fault test injected and counted even without ``-s`` (CI runs ``-q``)."""
    if REPORTS:
        terminalreporter.section("fault suite: injected and counted")
        for line in REPORTS:
            terminalreporter.write_line(line)


@pytest.fixture(scope="session")
def private() -> Iterator[Private]:
    missing = missing_binaries()
    if missing:
        pytest.skip(f"fault suite needs its own Postgres and Redis; missing: {', '.join(missing)}")
    postgres, redis = PrivatePostgres(), PrivateRedis()
    try:
        postgres.init()
        postgres.start()
        asyncio.run(_create_database(postgres))
        run_migrations(postgres.url(DATABASE))
        redis.start()
        yield Private(postgres, redis)
    finally:
        redis.close()
        postgres.close()


@pytest.fixture
def fault_settings(private: Private) -> Settings:
    return Settings(
        database_url=private.database_url,
        redis_url=private.redis.url,
        gateway_token="test-gateway-token-3d9f1c7a5b2e8064",
        admin_secret="test-admin-secret-8c2e4a6f1d3b5907",
        discord_bot_token="test-bot-token",
        discord_bot_user_id=1000,
        # A fault run sends each author dozens of mentions a minute; the per-person limits
        # are not what it tests (tests/e2e/test_limits.py does), so they stay out of the way.
        turns_per_user_per_minute=10_000,
        commands_per_user_per_minute=10_000,
        _env_file=None,
    )


@pytest.fixture
async def fault_sessions(private: Private) -> AsyncIterator[SessionFactory]:
    """Empty tables and an empty queue; a test that crashed a service gets it back first."""
    if not private.postgres.running():
        private.postgres.start()
    if private.redis.process is None:
        private.redis.start()
    engine = create_engine(private.database_url, pool_size=5)
    tables = ", ".join(f'"{t.name}"' for t in Base.metadata.sorted_tables)
    async with engine.begin() as conn:
        await conn.exec_driver_sql(f"TRUNCATE {tables} RESTART IDENTITY CASCADE")
    redis = Redis.from_url(private.redis.url)
    await redis.flushall()
    await redis.aclose()
    try:
        yield create_session_factory(engine)
    finally:
        await engine.dispose()


@pytest.fixture
def worker_log(tmp_path: Path) -> Path:
    return tmp_path / "worker.log"
