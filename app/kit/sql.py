"""Small SQL helpers shared by the table owners."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from sqlalchemy import BigInteger, ColumnElement, any_, func, literal, text, update
from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm import InstrumentedAttribute


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


def mention_pattern(user_id: int) -> str:
    """A Postgres regular expression for a Discord mention of ``user_id`` (`<@id>`, `<@!id>`)."""
    return f"<@!?{int(user_id)}>"


async def replace_mentions_in(
    session: AsyncSession,
    column: InstrumentedAttribute[Any],
    user_id: int,
    token: str,
    *where: ColumnElement[bool],
) -> int:
    """Replace every mention of ``user_id`` in ``column`` (of the rows ``where`` picks) with
    ``token``, in SQL; how many rows changed. Called by the column's table owner."""
    pattern = mention_pattern(user_id)
    table = column.class_
    result = await session.execute(
        update(table)
        .where(column.regexp_match(pattern), *where)
        .values({column.key: func.regexp_replace(column, pattern, token, "g")})
        .returning(literal(1))
    )
    return len(result.all())
