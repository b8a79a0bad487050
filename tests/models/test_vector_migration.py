"""On a PostgreSQL without pgvector (Debian's 15 here, on 5432) the migrations stop at 0014
with a message that names what to install, and leave the server as it was: Alembic runs
every pending revision in one transaction."""

from __future__ import annotations

import asyncio
import os

import asyncpg
import pytest

from tests.conftest import DB_NAME
from tests.support.migrations import _migrate

HOST = os.environ.get("TEST_PG_PLAIN_HOST", "127.0.0.1")
PORT = int(os.environ.get("TEST_PG_PLAIN_PORT", "5432"))


async def _plain_server() -> asyncpg.Connection | None:
    try:
        conn = await asyncpg.connect(host=HOST, port=PORT, user="postgres", database="postgres")
    except (OSError, asyncpg.PostgresError):
        return None
    if await conn.fetchval("SELECT 1 FROM pg_available_extensions WHERE name = 'vector'"):
        await conn.close()
        return None
    return conn


async def test_without_pgvector_the_migration_stops_naming_it_and_changes_nothing() -> None:
    admin = await _plain_server()
    if admin is None:
        pytest.skip(f"no PostgreSQL without pgvector on {HOST}:{PORT}")
    name = f"{DB_NAME}_novector"
    await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    await admin.execute(f'CREATE DATABASE "{name}"')
    try:
        url = f"postgresql+asyncpg://postgres@{HOST}:{PORT}/{name}"
        with pytest.raises(Exception, match="pgvector") as stopped:
            await asyncio.to_thread(_migrate, url, "head", False)
        assert "postgresql-<version>-pgvector" in str(stopped.value)
        assert "Nothing was changed" in str(stopped.value)
        conn = await asyncpg.connect(host=HOST, port=PORT, user="postgres", database=name)
        try:
            tables = await conn.fetchval(
                "SELECT count(*) FROM information_schema.tables WHERE table_schema = 'public'"
            )
        finally:
            await conn.close()
        assert tables == 0  # not even alembic_version: the whole upgrade rolled back
    finally:
        await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        await admin.close()
