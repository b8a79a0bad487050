"""The pool pings a connection only when it sat idle: one used a moment ago goes out as it
is (no BEGIN, ";", ROLLBACK before every transaction), one idle longer is checked and, if
Postgres dropped it, replaced together with the rest of the pool."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import asyncpg
import pytest
from sqlalchemy import text
from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import AsyncEngine

from app.db import create_engine, create_session_factory


@asynccontextmanager
async def pool(database_url: str, *, ping_after_idle_s: float) -> AsyncIterator[AsyncEngine]:
    engine = create_engine(database_url, pool_size=1, ping_after_idle_s=ping_after_idle_s)
    try:
        yield engine
    finally:
        await engine.dispose()


async def backend_of(engine: AsyncEngine) -> int:
    async with create_session_factory(engine)() as session:
        return int(await session.scalar(text("SELECT pg_backend_pid()")))


async def terminate(database_url: str, pid: int) -> None:
    """Ends that server process and waits until it is gone (as a restart would)."""
    conn = await asyncpg.connect(database_url.replace("postgresql+asyncpg://", "postgresql://"))
    try:
        assert await conn.fetchval("SELECT pg_terminate_backend($1, 5000)", pid)
    finally:
        await conn.close()


async def test_a_connection_dropped_while_idle_is_replaced_on_checkout(database_url: str) -> None:
    async with pool(database_url, ping_after_idle_s=0.0) as engine:
        dropped = await backend_of(engine)
        await terminate(database_url, dropped)

        # Idle longer than the threshold: pinged, found dead, replaced before it is used.
        assert await backend_of(engine) != dropped


async def test_a_connection_used_a_moment_ago_is_not_pinged(database_url: str) -> None:
    async with pool(database_url, ping_after_idle_s=3600.0) as engine:
        dropped = await backend_of(engine)
        await terminate(database_url, dropped)

        # No ping: the statement itself meets the dropped connection and fails, as any
        # statement does during an outage.
        with pytest.raises(DBAPIError) as failure:
            await backend_of(engine)
        assert failure.value.connection_invalidated

        # The pool was renewed: the next unit of work (a job's retry) runs on a new one.
        assert await backend_of(engine) != dropped
