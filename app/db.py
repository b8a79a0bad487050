"""Engine and session factories; nothing is connected at import time."""

from __future__ import annotations

import os
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any
from uuid import uuid4

import asyncpg
from sqlalchemy import event
from sqlalchemy import exc as sa_exc
from sqlalchemy.engine import Dialect, ExceptionContext
from sqlalchemy.ext.asyncio import (
    AsyncEngine,
    AsyncSession,
    async_sessionmaker,
    create_async_engine,
)
from sqlalchemy.pool import ConnectionPoolEntry, PoolProxiedConnection

SessionFactory = async_sessionmaker[AsyncSession]


# A pooled connection idle longer than this is pinged before it is handed out; one used more
# recently is not (SQLAlchemy's pre-ping pings every checkout: BEGIN, ";" and ROLLBACK, three
# round trips, ~0.5 ms on each of a turn's transactions).
PING_AFTER_IDLE_S = 1.0


def create_engine(
    database_url: str,
    *,
    pool_size: int = 10,
    transaction_pooling: bool = False,
    ping_after_idle_s: float = PING_AFTER_IDLE_S,
) -> AsyncEngine:
    """``transaction_pooling``: DATABASE_URL is a PgBouncer in transaction mode (or any
    proxy that may give each transaction another server connection)."""
    engine = create_async_engine(
        database_url,
        pool_size=pool_size,
        max_overflow=pool_size,
        # The most recently used connection first: the busy few stay warm (no ping), the
        # rest idle and are pinged when next needed.
        pool_use_lifo=True,
        pool_timeout=5,
        connect_args=connect_args(transaction_pooling),
        # Bound values (memory text, message content) never reach an error message or a log.
        hide_parameters=True,
    )
    event.listen(engine.sync_engine, "handle_error", _drop_server_detail)
    _ping_when_idle(engine, ping_after_idle_s)
    return engine


def _ping_when_idle(engine: AsyncEngine, after_s: float) -> None:
    """A connection that sat in the pool longer than ``after_s`` is pinged on checkout; if
    the ping fails (Postgres restarted, a proxy or firewall dropped it), every connection
    pooled before now is replaced and the checkout gets a new one, as with pre-ping. One
    used more recently goes out unpinged: should the server have gone in that moment, its
    first statement fails like any statement during an outage (the pool is then renewed,
    and the work's retry runs on a new connection)."""
    dialect: Dialect = engine.dialect

    def checkin(dbapi_connection: Any, record: ConnectionPoolEntry) -> None:
        record.info["idle_since"] = time.monotonic()

    def checkout(
        dbapi_connection: Any, record: ConnectionPoolEntry, proxy: PoolProxiedConnection
    ) -> None:
        idle_since = record.info.pop("idle_since", None)
        if idle_since is None or time.monotonic() - idle_since <= after_s:
            return  # new, or used a moment ago
        try:
            alive = dialect.do_ping(dbapi_connection)
        except Exception as exc:
            raise sa_exc.InvalidatePoolError("pooled connection failed its ping") from exc
        if not alive:
            raise sa_exc.InvalidatePoolError("pooled connection failed its ping")

    event.listen(engine.sync_engine, "checkin", checkin)
    event.listen(engine.sync_engine, "checkout", checkout)


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
