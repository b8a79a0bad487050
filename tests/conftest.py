"""Shared fixtures: a real Postgres database migrated with Alembic, a real Redis, settings.

Each test starts from empty tables (TRUNCATE) so end-to-end tests can commit freely.
The Postgres must have pgvector (`.ci/postgres` starts one on 127.0.0.1:5433); TEST_PG_HOST,
TEST_PG_PORT and TEST_PG_USER point elsewhere, TEST_REDIS_PORT at another Redis.
Parallel runs (several developers on one machine) pick their own database and Redis db via
TEST_DATABASE_NAME and TEST_REDIS_DB; under pytest-xdist each worker (gw0, gw1, …) adds its
own suffix to the database and its index to the Redis db."""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator, Iterator
from functools import cache, partial

import asyncpg
import pytest
from alembic.config import Config
from redis.asyncio import Redis
from sqlalchemy.ext.asyncio import AsyncEngine

from alembic import command
from app.config import DEFAULT_CHAT_MODEL, Provider, Settings
from app.db import SessionFactory, create_engine, create_session_factory
from app.dev.local_embeddings import LocalEmbeddings
from app.discord.fake import MISFITS
from app.embeddings.fake import FakeEmbeddings
from app.models import Base
from tests.support.servers import serve
from tests.support.stack import Stack, running_stack
from tests.support.trust_env import World, WorldWith, trust_world

# Fixtures that reach the real Postgres or Redis: a test using any of them is marked
# `services`; the rest are pure and run in the fast lane (`make fast`).
SERVICE_FIXTURES = {
    "database_url",
    "settings",
    "engine",
    "sessions",
    "redis",
    "world",
    "stack",
    "private",
    "fault_settings",
    "fault_sessions",
}
# Suites and tests that start processes or servers of their own (the relay, kubectl,
# docker-compose), or fuzz: `slow`.
SLOW_PATHS = (
    "faults/",
    "browser/",
    "test_fuzz_",
    "test_dev_stack",
    "test_behind_",
    "test_startup_refusals",
    "test_wait_for_schema",
    "test_api_drain",
    "test_k8s_manifests",  # kubectl
    "test_compose",  # docker-compose
    "test_python_m_app_relay_",  # the relay as its own process
    "test_the_relay_process_imports_nothing",
    "test_two_processes_split_the_shards",
)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    # A module marked both_providers runs each test that reaches the settings on both.
    marked = metafunc.definition.get_closest_marker("both_providers") is not None
    if marked and "provider" in metafunc.fixturenames:
        metafunc.parametrize("provider", list(Provider), indirect=True, ids=str)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if SERVICE_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.services)
        if any(part in item.nodeid for part in SLOW_PATHS):
            item.add_marker(pytest.mark.slow)


PG_HOST = os.environ.get("TEST_PG_HOST", "127.0.0.1")
PG_PORT = int(os.environ.get("TEST_PG_PORT", "5433"))
PG_USER = os.environ.get("TEST_PG_USER", "postgres")
XDIST_WORKER = os.environ.get("PYTEST_XDIST_WORKER", "")
_WORKER_INDEX = int(XDIST_WORKER.removeprefix("gw") or 0) if XDIST_WORKER else 0
DB_NAME = os.environ.get("TEST_DATABASE_NAME", "bot_test") + (
    f"_{XDIST_WORKER}" if XDIST_WORKER else ""
)
REDIS_DB = int(os.environ.get("TEST_REDIS_DB", "9")) + _WORKER_INDEX
REDIS_PORT = int(os.environ.get("TEST_REDIS_PORT", "6379"))
DATABASE_URL = f"postgresql+asyncpg://{PG_USER}@{PG_HOST}:{PG_PORT}/{DB_NAME}"
REDIS_URL = f"redis://127.0.0.1:{REDIS_PORT}/{REDIS_DB}"


async def _recreate_database() -> None:
    conn = await asyncpg.connect(host=PG_HOST, port=PG_PORT, user=PG_USER, database="postgres")
    try:
        await conn.execute(f'DROP DATABASE IF EXISTS "{DB_NAME}" WITH (FORCE)')
        await conn.execute(f'CREATE DATABASE "{DB_NAME}"')
    finally:
        await conn.close()


def run_migrations(url: str) -> None:
    config = Config("alembic.ini")
    config.set_main_option("sqlalchemy.url", url)
    config.attributes["configure_logger"] = False
    command.upgrade(config, "head")


@pytest.fixture(scope="session")
def database_url() -> Iterator[str]:
    asyncio.run(_recreate_database())
    run_migrations(DATABASE_URL)
    yield DATABASE_URL


@pytest.fixture
def provider(request: pytest.FixtureRequest) -> Provider:
    """CHAT_PROVIDER for the test: anthropic, unless a module parametrises it
    (``pytestmark = BOTH_PROVIDERS``) to run its tests on both."""
    return Provider(getattr(request, "param", Provider.ANTHROPIC))


@pytest.fixture
def settings(database_url: str, provider: Provider) -> Settings:
    # With openai the chat model is a name the fake serves (the Claude default would be refused
    # by a real server); the stack points OPENAI_BASE_URL at FakeOpenAI.
    openai = provider is Provider.OPENAI
    return Settings(
        chat_provider=provider,
        chat_model="fake-chat-model" if openai else DEFAULT_CHAT_MODEL,
        database_url=database_url,
        redis_url=REDIS_URL,
        gateway_token="test-gateway-token-3d9f1c7a5b2e8064",
        admin_secret="test-admin-secret-8c2e4a6f1d3b5907",
        discord_bot_token="test-bot-token",
        discord_bot_user_id=1000,
        anthropic_api_key="test-anthropic-key",
        _env_file=None,
    )


@pytest.fixture(scope="session")
async def engine(database_url: str) -> AsyncIterator[AsyncEngine]:
    engine = create_engine(database_url, pool_size=5)
    yield engine
    await engine.dispose()


@pytest.fixture
async def sessions(engine: AsyncEngine) -> AsyncIterator[SessionFactory]:
    async with engine.begin() as conn:
        touched = (await conn.exec_driver_sql(_touched_tables())).scalars().all()
        if touched:
            tables = ", ".join(f'"{name}"' for name in touched)
            await conn.exec_driver_sql(f"TRUNCATE {tables} RESTART IDENTITY CASCADE")
    yield create_session_factory(engine)


@cache
def _touched_tables() -> str:
    """The tables an earlier test left rows in or drew ids from (a sequence that has been
    used since its last restart): emptying and restarting only those leaves every table as
    TRUNCATE of all of them would, at a fraction of its cost (~60 ms a test: new files for
    every table and index)."""
    names = [t.name for t in Base.metadata.sorted_tables]
    rows = " UNION ALL ".join(
        f"SELECT '{name}' AS name WHERE EXISTS (SELECT FROM \"{name}\")" for name in names
    )
    used = (
        "SELECT DISTINCT t.relname FROM pg_sequences s "
        "JOIN pg_class q ON q.relname = s.sequencename "
        "JOIN pg_namespace n ON n.oid = q.relnamespace AND n.nspname = s.schemaname "
        "JOIN pg_depend d ON d.objid = q.oid AND d.deptype IN ('a', 'i') "
        "JOIN pg_class t ON t.oid = d.refobjid "
        "WHERE s.schemaname = current_schema() AND s.last_value IS NOT NULL"
    )
    return f"{rows} UNION {used}"


@pytest.fixture
async def redis() -> AsyncIterator[Redis]:
    client = Redis.from_url(REDIS_URL)
    await client.flushdb()
    yield client
    await client.flushdb()
    await client.aclose()


@pytest.fixture(scope="session")
def local_model() -> Iterator[LocalEmbeddings]:
    """The real local embedding model behind its OpenAI-compatible server, once per session
    (it starts in well under a second): for the tests where meaning matters."""
    model = LocalEmbeddings(threads=1)
    model.start()
    yield model
    model.stop()


@pytest.fixture
async def fake_embeddings() -> AsyncIterator[tuple[FakeEmbeddings, str]]:
    """The deterministic fake embeddings API on a real port, and its URL (where meaning does
    not matter; ``tests/support/embeddings.fake_settings`` points the bot at it)."""
    embeddings = FakeEmbeddings()
    async with serve(embeddings.app) as url:
        yield embeddings, url


@pytest.fixture
def world_with(
    settings: Settings, sessions: SessionFactory, redis: Redis, monkeypatch: pytest.MonkeyPatch
) -> WorldWith:
    """``trust_world`` on the test's database and Redis, with settings overridden by keyword:
    what a test module's own ``world`` fixture opens."""
    return partial(trust_world, settings, monkeypatch)


@pytest.fixture
async def world(world_with: WorldWith) -> AsyncIterator[World]:
    """The whole stack for the privacy tests (tests/support/trust_env.py)."""
    async with world_with() as running:
        yield running


@pytest.fixture
async def stack(
    settings: Settings, sessions: SessionFactory, redis: Redis, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[Stack]:
    """The whole bot on real ports with the fakes beside it (tests/support/stack.py); a
    module defining its own ``stack`` (other settings, another stack) overrides this one."""
    async with running_stack(settings, monkeypatch) as running:
        yield running


@pytest.fixture(autouse=True)
def discord_calls_fit_the_description() -> Iterator[None]:
    """Every request any fake Discord got during the test fits Discord's published API
    description (app/discord/described.py); a test that sends a misfit on purpose takes it
    back with ``FakeDiscord.take_misfits``."""
    MISFITS.clear()
    yield
    misfits = [str(m) for m in MISFITS]
    MISFITS.clear()
    assert misfits == [], "Discord calls that do not fit its API description"
