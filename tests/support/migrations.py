"""A scratch database of its own for a migration test: created at one revision, migrated up
or down with the real Alembic commands, dropped at the end."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass

import asyncpg
from alembic.config import Config
from sqlalchemy.ext.asyncio import AsyncEngine

from alembic import command
from app.db import create_engine
from tests.conftest import DB_NAME, PG_HOST, PG_PORT, PG_USER


@dataclass(frozen=True, slots=True)
class ScratchDatabase:
    url: str
    engine: AsyncEngine

    async def migrate(self, revision: str, *, down: bool = False) -> None:
        await asyncio.to_thread(_migrate, self.url, revision, down)


def _migrate(url: str, revision: str, down: bool) -> None:
    config = Config("alembic.ini")
    config.set_main_option("sqlalchemy.url", url)
    config.attributes["configure_logger"] = False
    (command.downgrade if down else command.upgrade)(config, revision)


@asynccontextmanager
async def database_at(suffix: str, revision: str) -> AsyncIterator[ScratchDatabase]:
    """A fresh database named after the test database and ``suffix``, at ``revision``."""
    name = f"{DB_NAME}_{suffix}"
    url = f"postgresql+asyncpg://{PG_USER}@{PG_HOST}:{PG_PORT}/{name}"
    admin = await asyncpg.connect(host=PG_HOST, port=PG_PORT, user=PG_USER, database="postgres")
    await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    await admin.execute(f'CREATE DATABASE "{name}"')
    await asyncio.to_thread(_migrate, url, revision, False)
    engine = create_engine(url, pool_size=1)
    try:
        yield ScratchDatabase(url, engine)
    finally:
        await engine.dispose()
        await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        await admin.close()
