"""Admin usage: model calls and tokens of one JST day by guild, person and purpose, read from
the usage rows every job writes (the same rows `!bot usage` and the daily token caps read)."""

from __future__ import annotations

import re
from datetime import date
from typing import Annotated

from fastapi import APIRouter, Depends, Query
from fastapi.exceptions import RequestValidationError

from app.admin.auth import require_admin
from app.admin.deps import get_sessions
from app.admin.schemas import AUTH_ERRORS, UsageBody, UsageRowBody, UsageSpent
from app.db import SessionFactory
from app.kit.clock import jst_day, utcnow
from app.usage import store
from app.usage.store import EVERYWHERE, Spent

router = APIRouter(tags=["admin"], dependencies=[Depends(require_admin)], responses=AUTH_ERRORS)

Sessions = Annotated[SessionFactory, Depends(get_sessions)]
_DAY = re.compile(r"\d{4}-\d{2}-\d{2}")
BAD_DAY = "day must be a JST date written YYYY-MM-DD, such as 2026-12-04"


def parse_day(value: str | None) -> date:
    """Today (JST) when absent; for anything but a real YYYY-MM-DD date, the same 422 as any
    other parameter's (a plain ``date`` parameter would also take a Unix timestamp)."""
    if value is None:
        return jst_day(utcnow())
    try:
        if _DAY.fullmatch(value):
            return date.fromisoformat(value)
    except ValueError:
        pass
    raise RequestValidationError(
        [{"type": "value_error", "loc": ("query", "day"), "msg": BAD_DAY, "input": value}]
    )


def _spent(spent: Spent) -> UsageSpent:
    return UsageSpent(
        calls=spent.calls,
        input_tokens=spent.input_tokens,
        output_tokens=spent.output_tokens,
        estimated_calls=spent.estimated_calls,
    )


@router.get(
    "/usage",
    response_model=UsageBody,
    summary="Model calls and tokens of one JST day, by guild, person and purpose",
)
async def usage(
    sessions: Sessions,
    day: Annotated[str | None, Query(description="JST day, YYYY-MM-DD; today if absent")] = None,
    guild_id: Annotated[
        int | None, Query(alias="guildId", ge=1, le=2**63 - 1, description="one guild only")
    ] = None,
    limit: Annotated[int, Query(ge=1, le=10_000)] = 1000,
) -> UsageBody:
    when = parse_day(day)
    where = EVERYWHERE if guild_id is None else guild_id
    async with sessions() as session:
        rows, total, count = await store.day_rows(session, when, where, limit=limit)
    return UsageBody(
        day=when,
        guild_id=str(guild_id) if guild_id is not None else None,
        total=_spent(total),
        rows=[
            UsageRowBody(
                guild_id=str(row.guild_id) if row.guild_id is not None else None,
                user_id=str(row.user_id) if row.user_id is not None else None,
                purpose=row.purpose,
                calls=row.spent.calls,
                input_tokens=row.spent.input_tokens,
                output_tokens=row.spent.output_tokens,
                estimated_calls=row.spent.estimated_calls,
            )
            for row in rows
        ],
        more=max(0, count - len(rows)),
    )
