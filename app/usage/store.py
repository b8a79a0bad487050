"""The one owner of ``model_usage``: what each job spent on models, added per JST day, guild,
person and purpose, and the readings of it (the daily caps, `!bot usage`, ``GET /usage``).

Callers speak in ``None`` for "a DM / no guild" and "nobody in particular"; the table keys
them as 0 so that one row per key holds (a primary key cannot hold NULL)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import date
from enum import StrEnum
from typing import Any

from sqlalchemy import BigInteger, ColumnElement, delete, func, literal, select, true
from sqlalchemy.dialects.postgresql import Insert, insert
from sqlalchemy.ext.asyncio import AsyncSession

from app.kit.spend import PurposeSpend, UsageKey
from app.models.usage import ModelUsage

NONE = 0  # the key of "no guild" (a DM) and of "nobody in particular"


class Everywhere(StrEnum):
    """Every guild and every DM: an operator's view."""

    ALL = "all"


EVERYWHERE = Everywhere.ALL
Where = int | None | Everywhere  # a guild, DMs (None), or everywhere


@dataclass(frozen=True, slots=True)
class Spent:
    calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    # Of ``calls``, those whose server reported no usage: their tokens are our estimate
    # (counted in the tokens, and by the budgets, like reported ones).
    estimated_calls: int = 0

    @property
    def tokens(self) -> int:
        return self.input_tokens + self.output_tokens


@dataclass(frozen=True, slots=True)
class UsageRow:
    guild_id: int | None
    user_id: int | None
    purpose: str
    spent: Spent


@dataclass(frozen=True, slots=True)
class Summary:
    """One period's usage in one place, by purpose and by person (most tokens first)."""

    total: Spent
    by_purpose: list[tuple[str, Spent]]
    by_person: list[tuple[int | None, Spent]]
    more_people: int  # people beyond ``by_person``'s limit


def _id(value: int | None) -> int:
    return NONE if value is None else value


def _maybe(value: int) -> int | None:
    return None if value == NONE else value


async def add(session: AsyncSession, spent: Mapping[UsageKey, PurposeSpend]) -> None:
    """Add a job's calls to their rows in one statement (rows in key order, so two jobs
    adding to the same rows never deadlock); the caller commits."""
    rows = [
        {
            "day": key.day,
            "guild_id": _id(key.guild_id),
            "user_id": _id(key.user_id),
            "purpose": key.purpose,
            "calls": s.model_calls,
            "input_tokens": s.input_tokens,
            "output_tokens": s.output_tokens,
            "estimated_calls": s.estimated_calls,
        }
        for key, s in sorted(spent.items(), key=lambda item: _row_order(item[0]))
    ]
    if not rows:
        return
    statement = insert(ModelUsage).values(rows)
    table = ModelUsage.__table__.c
    await session.execute(
        statement.on_conflict_do_update(
            index_elements=[table.day, table.guild_id, table.user_id, table.purpose],
            set_=_added(statement),
        )
    )


def _added(statement: Insert) -> dict[str, Any]:
    """ON CONFLICT: the new calls and tokens add to the row's."""
    table = ModelUsage.__table__.c
    return {
        "calls": table.calls + statement.excluded.calls,
        "input_tokens": table.input_tokens + statement.excluded.input_tokens,
        "output_tokens": table.output_tokens + statement.excluded.output_tokens,
        "estimated_calls": table.estimated_calls + statement.excluded.estimated_calls,
        "updated_at": func.now(),
    }


def _row_order(key: UsageKey) -> tuple[date, int, int, str]:
    return key.day, _id(key.guild_id), _id(key.user_id), key.purpose


_TOKENS = ModelUsage.input_tokens + ModelUsage.output_tokens


async def person_tokens(session: AsyncSession, day: date, user_id: int) -> int:
    """The tokens spent for ``user_id`` on ``day``, everywhere."""
    query = select(func.coalesce(func.sum(_TOKENS), 0)).where(
        ModelUsage.day == day, ModelUsage.user_id == user_id
    )
    return int(await session.scalar(query) or 0)


async def guild_tokens(session: AsyncSession, day: date, guild_id: int) -> int:
    """The tokens spent in ``guild_id`` on ``day``, for everyone (and no one in particular)."""
    query = select(func.coalesce(func.sum(_TOKENS), 0)).where(
        ModelUsage.day == day, ModelUsage.guild_id == guild_id
    )
    return int(await session.scalar(query) or 0)


def _in(where: Where) -> ColumnElement[bool]:
    if isinstance(where, Everywhere):
        return true()
    return ModelUsage.guild_id == _id(where)


def _sums() -> tuple[ColumnElement[int], ...]:
    return (
        func.sum(ModelUsage.calls),
        func.sum(ModelUsage.input_tokens),
        func.sum(ModelUsage.output_tokens),
        func.sum(ModelUsage.estimated_calls),
    )


def _spent(calls: Any, input_tokens: Any, output_tokens: Any, estimated_calls: Any) -> Spent:
    """From SQL sums (numeric, or NULL over no rows)."""
    return Spent(
        int(calls or 0), int(input_tokens or 0), int(output_tokens or 0), int(estimated_calls or 0)
    )


async def summary(
    session: AsyncSession, where: Where, first: date, last: date, *, people: int = 10
) -> Summary:
    """Usage from ``first`` to ``last`` (JST days, both included) in ``where``: the total,
    each purpose, and the ``people`` who spent the most tokens."""
    scope = (_in(where), ModelUsage.day.between(first, last))
    total = (await session.execute(select(*_sums()).where(*scope))).one()
    purposes = await session.execute(
        select(ModelUsage.purpose, *_sums())
        .where(*scope)
        .group_by(ModelUsage.purpose)
        .order_by(func.sum(_TOKENS).desc(), func.sum(ModelUsage.calls).desc(), ModelUsage.purpose)
    )
    persons = (
        await session.execute(
            select(ModelUsage.user_id, *_sums(), func.count().over())
            .where(*scope)
            .group_by(ModelUsage.user_id)
            .order_by(func.sum(_TOKENS).desc(), func.sum(ModelUsage.calls).desc())
            .limit(people)
        )
    ).all()
    return Summary(
        total=_spent(*total),
        by_purpose=[(row[0], _spent(*row[1:])) for row in purposes],
        by_person=[(_maybe(row[0]), _spent(*row[1:5])) for row in persons],
        more_people=max(0, int(persons[0][5]) - len(persons)) if persons else 0,
    )


async def day_rows(
    session: AsyncSession, day: date, where: Where, *, limit: int
) -> tuple[list[UsageRow], Spent, int]:
    """One JST day's rows in ``where``, most tokens first, at most ``limit``; with the
    day's total there and how many rows there are in all."""
    scope = (_in(where), ModelUsage.day == day)
    total = (await session.execute(select(*_sums(), func.count()).where(*scope))).one()
    rows = await session.scalars(
        select(ModelUsage)
        .where(*scope)
        .order_by(
            _TOKENS.desc(),
            ModelUsage.calls.desc(),
            ModelUsage.guild_id,
            ModelUsage.user_id,
            ModelUsage.purpose,
        )
        .limit(limit)
    )
    found = [
        UsageRow(
            _maybe(r.guild_id),
            _maybe(r.user_id),
            r.purpose,
            Spent(r.calls, r.input_tokens, r.output_tokens, r.estimated_calls),
        )
        for r in rows
    ]
    return found, _spent(*total[:4]), int(total[4])


async def forget_person(session: AsyncSession, user_id: int) -> int:
    """Erasure: the person's rows become nobody's (added to the rows of their guild, day and
    purpose without a person), so the totals stay and the identity goes; how many rows."""
    table = ModelUsage.__table__.c
    columns = [
        "day",
        "guild_id",
        "user_id",
        "purpose",
        "calls",
        "input_tokens",
        "output_tokens",
        "estimated_calls",
    ]
    theirs = select(
        table.day,
        table.guild_id,
        literal(NONE, BigInteger),
        table.purpose,
        table.calls,
        table.input_tokens,
        table.output_tokens,
        table.estimated_calls,
    ).where(table.user_id == user_id)
    statement = insert(ModelUsage).from_select(columns, theirs)
    await session.execute(
        statement.on_conflict_do_update(
            index_elements=[table.day, table.guild_id, table.user_id, table.purpose],
            set_=_added(statement),
        )
    )
    gone = await session.execute(delete(ModelUsage).where(table.user_id == user_id))
    return int(getattr(gone, "rowcount", 0))
