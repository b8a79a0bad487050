"""The stored embeddings' upkeep in SQL, shared by the owners of `memories` and `messages`:
which rows wait for a vector of the current space, and writing vectors back only while the
text is still the one they were made from (an edit, a delete or an erasure since the read
wins: its row keeps no vector of the old text)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass

from sqlalchemy import TextClause, text
from sqlalchemy.ext.asyncio import AsyncSession

from app.kit.vectors import Embedding


@dataclass(frozen=True, slots=True)
class EmbeddedTable:
    """A table with `embedding` and `embedding_space`. ``live`` is the SQL condition of rows
    whose text may be embedded (migration 0017's partial indexes cover it); ``guard`` the same
    without the text itself, checked again when the vectors are written."""

    table: str
    live: str = "TRUE"
    guard: str = "TRUE"


@dataclass(frozen=True, slots=True)
class Waiting:
    """A row waiting for its vector: its id and the text to embed."""

    id: int
    content: str


async def waiting(
    session: AsyncSession, table: EmbeddedTable, space: str, *, limit: int
) -> list[Waiting]:
    """Up to ``limit`` rows without a vector of ``space``: rows without any first (new text),
    in id order, then rows of another space (a changed model)."""
    found = await session.execute(_waiting(table), {"limit": limit})
    rows = [Waiting(int(i), str(c)) for i, c in found.tuples()]
    if len(rows) < limit:
        other = await session.execute(
            _other_space(table), {"space": space, "limit": limit - len(rows)}
        )
        rows += [Waiting(int(i), str(c)) for i, c in other.tuples()]
    return rows


def _waiting(table: EmbeddedTable) -> TextClause:
    return text(
        f"SELECT id, content FROM {table.table} WHERE embedding IS NULL AND {table.live} "
        "ORDER BY id LIMIT :limit"
    )


def _other_space(table: EmbeddedTable) -> TextClause:
    # Two ranges of the space index, never a scan of every row with a current vector.
    return text(
        f"SELECT id, content FROM {table.table} WHERE embedding IS NOT NULL AND {table.live} "
        "AND (embedding_space < :space OR embedding_space > :space) ORDER BY id LIMIT :limit"
    )


async def count_waiting(session: AsyncSession, table: EmbeddedTable, space: str) -> int:
    """How many rows wait for a vector of ``space`` (the back-fill's metric)."""
    statement = text(
        f"SELECT (SELECT count(*) FROM {table.table} WHERE embedding IS NULL AND {table.live})"
        f" + (SELECT count(*) FROM {table.table} WHERE embedding IS NOT NULL AND {table.live} "
        "AND (embedding_space < :space OR embedding_space > :space))"
    )
    return int(await session.scalar(statement, {"space": space}) or 0)


async def store(
    session: AsyncSession, table: EmbeddedTable, rows: Sequence[tuple[Waiting, Embedding]]
) -> int:
    """Each row's vector, where the row still holds the text it was made from and may still
    be embedded; how many were written."""
    if not rows:
        return 0
    payload = json.dumps(
        [
            {"id": row.id, "content": row.content, "embedding": vector.sql(), "space": vector.space}
            for row, vector in rows
        ],
        ensure_ascii=False,
    )
    statement = text(
        f"UPDATE {table.table} AS t SET embedding = CAST(v.embedding AS halfvec), "
        "embedding_space = v.space "
        "FROM jsonb_to_recordset(CAST(:rows AS jsonb)) "
        "AS v(id bigint, content text, embedding text, space text) "
        f"WHERE t.id = v.id AND t.content = v.content AND {table.guard}"
    )
    result = await session.execute(statement, {"rows": payload})
    return int(getattr(result, "rowcount", 0))
