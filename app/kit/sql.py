"""Small SQL helpers shared by the table owners."""

from __future__ import annotations

import json as _json
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from sqlalchemy import BigInteger, any_, literal, text
from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.ext.asyncio import AsyncSession


def any_array(ids: Iterable[int]) -> Any:
    """``= ANY(:ids)`` with one array parameter instead of one bind per id, so a large set
    stays under the driver's parameter limit."""
    return any_(literal(sorted(set(ids)), ARRAY(BigInteger)))


async def bump_identity(session: AsyncSession, table: str) -> None:
    """Move ``table``'s id sequence past ids written by hand (an import), never backwards:
    an id reused after a delete would confuse the ledger and the rollback."""
    sequence = await session.scalar(text("SELECT pg_get_serial_sequence(:t, 'id')"), {"t": table})
    if sequence is None:
        return
    state = (await session.execute(text(f"SELECT last_value, is_called FROM {sequence}"))).one()
    used = state.last_value if state.is_called else state.last_value - 1
    highest = await session.scalar(text(f'SELECT coalesce(max(id), 0) FROM "{table}"'))
    target = max(int(used), int(highest or 0))
    if target > 0:
        await session.execute(text("SELECT setval(:s, :v, true)"), {"s": sequence, "v": target})


async def rewrite_matching(
    session: AsyncSession,
    *,
    table: str,
    key: str | tuple[str, ...],
    column: str,
    patterns: Sequence[str],
    rewrite: Callable[[Any], Any],
    json: bool = False,
) -> int:
    """Rewrite ``column`` of the rows whose text matches any ILIKE pattern (an erasure's
    scrub, called by the table's owner with its own table): each row's value goes through
    ``rewrite`` and is written back when it changed. How many rows changed."""
    if not patterns:
        return 0
    keys = (key,) if isinstance(key, str) else key
    selected = ", ".join(f'"{k}"' for k in keys)
    text_of = f'"{column}"::text' if json else f'"{column}"'
    rows = await session.execute(
        text(
            f'SELECT {selected}, "{column}" FROM "{table}" '
            f"WHERE {text_of} ILIKE ANY(CAST(:patterns AS text[]))"
        ),
        {"patterns": list(patterns)},
    )
    where = " AND ".join(f'"{k}" = :k{i}' for i, k in enumerate(keys))
    value_sql = "CAST(:value AS jsonb)" if json else ":value"
    changed = 0
    for *idents, value in rows.all():
        new = rewrite(value)
        if new == value:
            continue
        await session.execute(
            text(f'UPDATE "{table}" SET "{column}" = {value_sql} WHERE {where}'),
            {"value": _json.dumps(new) if json else new}
            | {f"k{i}": ident for i, ident in enumerate(idents)},
        )
        changed += 1
    return changed
