"""MEM-08's import: what a profile already holds, and the bulk insert of imported memories."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import (
    Text,
    any_,
    insert,
    literal,
    or_,
    select,
)
from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.ext.asyncio import AsyncSession

from app.kit.sql import any_array, bump_identity
from app.kit.tokens import tokenize
from app.models.memory import (
    Memory,
    MemoryLog,
)


@dataclass(frozen=True, slots=True)
class ImportView:
    """What the store already holds of an import: owners of these ids, ids with history of
    their own here (changed or deleted since), and ledger rows already imported."""

    owners: dict[int, int]
    history: set[int]
    imported_keys: set[str]


async def import_view(
    session: AsyncSession, memory_ids: Sequence[int], log_keys: Sequence[str], prefix: str
) -> ImportView:
    owners = await session.execute(
        select(Memory.id, Memory.user_id).where(Memory.id == any_array(memory_ids))
    )
    history = await session.scalars(
        select(MemoryLog.memory_id)
        .where(MemoryLog.memory_id == any_array(memory_ids))
        .where(or_(MemoryLog.trigger.is_(None), ~MemoryLog.trigger.startswith(prefix)))
        .distinct()
    )
    keys = await session.scalars(
        select(MemoryLog.trigger).where(
            MemoryLog.trigger == any_(literal(list(log_keys), ARRAY(Text)))
        )
    )
    return ImportView(
        owners={memory_id: user_id for memory_id, user_id in owners},
        history={i for i in history if i is not None},
        imported_keys={k for k in keys if k is not None},
    )


async def insert_imported(
    session: AsyncSession,
    memories: Sequence[dict[str, Any]],
    ledger_rows: Sequence[dict[str, Any]],
) -> tuple[int, int]:
    """Memories and ledger rows exactly as an earlier deployment recorded them (ids kept;
    ones that exist by now are skipped); how many of each went in."""
    added = 0
    if memories:
        rows = [{**m, "search_tokens": tokenize(str(m["content"]))} for m in memories]
        statement = pg_insert(Memory).on_conflict_do_nothing().returning(Memory.id)
        added = len((await session.execute(statement, rows)).all())
    logged = 0
    if ledger_rows:
        statement = insert(MemoryLog).returning(MemoryLog.id)
        logged = len((await session.execute(statement, list(ledger_rows))).all())
    await bump_identity(session, "memories")
    return added, logged
