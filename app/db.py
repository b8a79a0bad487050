"""Engine and session factories; nothing is connected at import time."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any
from uuid import uuid4

import asyncpg
from sqlalchemy import event
from sqlalchemy.engine import ExceptionContext
from sqlalchemy.ext.asyncio import (
    AsyncEngine,
    AsyncSession,
    async_sessionmaker,
    create_async_engine,
)

SessionFactory = async_sessionmaker[AsyncSession]


def create_engine(
    database_url: str, *, pool_size: int = 10, transaction_pooling: bool = False
) -> AsyncEngine:
    """``transaction_pooling``: DATABASE_URL is a PgBouncer in transaction mode (or any
    proxy that may give each transaction another server connection)."""
    engine = create_async_engine(
        database_url,
        pool_size=pool_size,
        max_overflow=pool_size,
        pool_pre_ping=True,
        pool_timeout=5,
        connect_args=connect_args(transaction_pooling),
        # Bound values (memory text, message content) never reach an error message or a log.
        hide_parameters=True,
    )
    event.listen(engine.sync_engine, "handle_error", _drop_server_detail)
    return engine


def connect_args(transaction_pooling: bool) -> dict[str, Any]:
    """asyncpg's connection options. Behind a transaction pooler a prepared statement made
    on one server connection is missing (or another's) on the next, so: no statement cache
    in asyncpg or SQLAlchemy, and a unique name for each statement SQLAlchemy must prepare
    (within its transaction, which keeps one server connection). The bot keeps no other
    session state: its locks are transaction-scoped (pg_advisory_xact_lock), its settings
    SET LOCAL, and it neither LISTENs nor holds cursors or temporary tables across
    transactions."""
    args: dict[str, Any] = {"timeout": 5, "command_timeout": 30}
    if transaction_pooling:
        args |= {
            "statement_cache_size": 0,
            "prepared_statement_cache_size": 0,
            "prepared_statement_name_func": _statement_name,
        }
    return args


def transaction_pooling_from_env() -> bool:
    """DATABASE_TRANSACTION_POOLING, for the commands that read only the database settings
    (migrations, the import, wait-for-schema); spelled as pydantic reads a bool."""
    value = os.environ.get("DATABASE_TRANSACTION_POOLING", "").strip().lower()
    return value in ("1", "true", "t", "yes", "y", "on")


def _statement_name() -> str:
    return f"__asyncpg_{uuid4().hex}__"


def _drop_server_detail(context: ExceptionContext) -> None:
    """Postgres echoes stored values in an error's DETAIL ("Failing row contains (…)",
    "Key (id)=(…) already exists"), and asyncpg and SQLAlchemy copy it into their messages,
    which hide_parameters does not cover. Drop it from the whole chain; the message still
    names the constraint."""
    translated = context.original_exception
    server = translated.__cause__ if translated is not None else None
    if not isinstance(server, asyncpg.PostgresError) or not server.detail:
        return
    shown = str(server)
    server.detail = None
    hidden = str(server)
    for exc in (translated, context.sqlalchemy_exception):
        if exc is not None and exc.args and isinstance(exc.args[0], str):
            exc.args = (exc.args[0].replace(shown, hidden), *exc.args[1:])


def create_session_factory(engine: AsyncEngine) -> SessionFactory:
    return async_sessionmaker(engine, expire_on_commit=False, autoflush=False)


@asynccontextmanager
async def unit_of_work(sessions: SessionFactory) -> AsyncIterator[AsyncSession]:
    """One transaction: commit once at the end, roll back on any error.

    Services inside only ``flush()``; follow-up jobs are enqueued after this exits."""
    async with sessions() as session, session.begin():
        yield session
