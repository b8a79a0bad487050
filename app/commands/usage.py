"""`!bot usage`: today's and this month's model calls and tokens (JST days) for this guild, by
purpose and by person. Given by DM (an operator's), it covers every guild and DM."""

from __future__ import annotations

from datetime import date

from app.kit.clock import jst_day, utcnow
from app.services import Services
from app.usage import store
from app.usage.store import EVERYWHERE, Spent, Summary

PEOPLE_SHOWN = 10


async def report_usage(services: Services, guild_id: int | None) -> str:
    """The answer to `!bot usage` given in ``guild_id`` (None: by DM)."""
    today = jst_day(utcnow())
    where = EVERYWHERE if guild_id is None else guild_id
    async with services.sessions() as session:
        day = await store.summary(session, where, today, today, people=PEOPLE_SHOWN)
        month = await store.summary(
            session, where, today.replace(day=1), today, people=PEOPLE_SHOWN
        )
    return format_usage(today, day, month, everywhere=guild_id is None)


def format_usage(today: date, day: Summary, month: Summary, *, everywhere: bool) -> str:
    """Pure: the report. People appear by id (a mention would ping them)."""
    where = "every server and DM" if everywhere else "this server"
    return "\n".join(
        [
            f"**Model usage in {where}** (JST)",
            *_period(f"Today, {today.isoformat()}", day),
            *_period(f"This month, since {today.replace(day=1).isoformat()}", month),
        ]
    )


def _period(title: str, summary: Summary) -> list[str]:
    if summary.total.calls == 0:
        return [f"{title}: no model calls."]
    people = " · ".join(f"{_person(user_id)} {_spent(s)}" for user_id, s in summary.by_person)
    if summary.more_people:
        people += f" · and {summary.more_people} more"
    return [
        f"{title}: {_spent(summary.total)}{_estimated(summary.total)}",
        *(f"• {purpose}: {_spent(s)}" for purpose, s in summary.by_purpose),
        f"People: {people}",
    ]


def _person(user_id: int | None) -> str:
    return "no one in particular" if user_id is None else f"`{user_id}`"


def _spent(spent: Spent) -> str:
    calls = "call" if spent.calls == 1 else "calls"
    return f"{spent.calls} {calls}, {spent.tokens} tokens"


def _estimated(spent: Spent) -> str:
    """Said only when some calls' tokens are our estimate (the server reported no usage)."""
    if spent.estimated_calls == 0:
        return ""
    calls = "call's" if spent.estimated_calls == 1 else "calls'"
    return f" ({spent.estimated_calls} {calls} tokens estimated: the server reported none)"
