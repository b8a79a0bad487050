"""The SQLAlchemy models and the Alembic migrations describe the same schema."""

from __future__ import annotations

from typing import Any

from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy.engine import Connection
from sqlalchemy.ext.asyncio import AsyncEngine

from app.models import Base


def _diff(connection: Connection) -> list[Any]:
    context = MigrationContext.configure(connection, opts={"compare_server_default": True})
    return list(compare_metadata(context, Base.metadata))


async def test_models_match_migrations(engine: AsyncEngine) -> None:
    async with engine.connect() as conn:
        diff = await conn.run_sync(_diff)
    assert diff == []


async def test_contract_tables_exist(engine: AsyncEngine) -> None:
    expected = {
        "messages": {
            "id",
            "channel_id",
            "guild_id",
            "author_id",
            "author_name",
            "is_bot",
            "content",
            "created_at",
            "edited_at",
            "deleted_at",
        },
        "memories": {"id", "user_id", "content", "source", "created_at", "updated_at"},
        "memory_log": {
            "id",
            "memory_id",
            "user_id",
            "actor",
            "action",
            "reason",
            "before",
            "after",
            "run_id",
            "created_at",
        },
        "signals": {"id", "message_id", "user_id", "kind", "value", "created_at"},
        "nightly_runs": {
            "id",
            "day",
            "diary",
            "summary",
            "started_at",
            "finished_at",
            "rolled_back_at",
        },
        "observations": {
            "id",
            "channel_id",
            "user_id",
            "kind",
            "message_id",
            "content",
            "created_at",
            "consumed_at",
        },
        "episodes": {"id", "channel_id", "content", "created_at"},
        "pins": {"id", "scope", "channel_id", "content", "created_by", "created_at"},
    }
    async with engine.connect() as conn:
        rows = await conn.exec_driver_sql(
            "SELECT table_name, column_name FROM information_schema.columns "
            "WHERE table_schema = 'public'"
        )
        columns: dict[str, set[str]] = {}
        for table, column in rows:
            columns.setdefault(table, set()).add(column)
    for table, wanted in expected.items():
        assert wanted <= columns.get(table, set()), table
