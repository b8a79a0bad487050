"""Waiting on a condition in tests: poll it until it holds, or fail saying what was awaited."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable

from sqlalchemy import text

from app.db import SessionFactory


async def wait_until(
    condition: Callable[[], bool | Awaitable[bool]], *, within: float, what: str
) -> None:
    """Poll ``condition`` until it holds; fail with ``what`` after ``within`` seconds."""
    deadline = time.monotonic() + within
    while True:
        result = condition()
        if isinstance(result, Awaitable):
            result = await result
        if result:
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {within:.0f}s waiting for {what}")
        await asyncio.sleep(0.02)


async def someone_awaits_an_advisory_lock(sessions: SessionFactory) -> bool:
    """Whether a session of this database is blocked on an advisory lock right now."""
    async with sessions() as session:
        waiting = await session.scalar(
            text(
                "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted"
                " AND database = (SELECT oid FROM pg_database WHERE datname = current_database())"
            )
        )
    return bool(waiting)
