"""Small SQL helpers shared by the table owners."""

from __future__ import annotations

from collections.abc import Iterable
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
