"""Usage accounting: every model and decision call a job makes lands in one usage row per JST
day, guild, person and purpose, and `!bot usage` and `GET /usage` read the same figures the
fake chat model and decision service served (webhook → real worker → Postgres → the API)."""

from __future__ import annotations

import logging
import re
from collections import Counter
from datetime import date, timedelta
from typing import Any

import httpx
import pytest
from sqlalchemy import func, select

from app.commands.parser import STAFF_USAGE, StaffUsage, Usage, parse_command
from app.commands.usage import format_usage
from app.db import SessionFactory, unit_of_work
from app.kit.clock import jst_day, utcnow
from app.kit.spend import PurposeSpend, UsageKey
from app.models.usage import ModelUsage
from app.privacy import store as register
from app.usage import store
from app.usage.meter import tokens_of, without
from app.usage.store import EVERYWHERE, Spent
from tests.support.frames import message_create
from tests.support.providers import BOTH_PROVIDERS
from tests.support.stack import BOT_ID, Stack

pytestmark = BOTH_PROVIDERS

MENTION = f"<@{BOT_ID}>"
ALICE, BOB, CAROL, STAFF = 2001, 2002, 2003, 2099
GUILD, CHANNEL = 500, 300
AUTH = {"Authorization": "Bearer test-admin-secret-8c2e4a6f1d3b5907"}

# What one person's calls were: (guild, person, purpose) -> (calls, tokens).
Served = dict[tuple[int | None, int | None, str], tuple[int, int]]


async def served_while(
    stack: Stack, guild: int | None, person: int, *frames: dict[str, Any]
) -> Served:
    """Deliver ``frames`` and return what the fakes served meanwhile, as usage keys."""
    model_before, jev_before = len(stack.model.served), len(stack.jev.requests)
    await stack.deliver(*frames)
    served: Served = {}
    tokens = [i + o for i, o in stack.model.served[model_before:]]
    if tokens:  # no agent and no consolidation here: every chat call is a reply
        served[(guild, person, "reply")] = (len(tokens), sum(tokens))
    questions = Counter(body["question"] for body in stack.jev.requests[jev_before:])
    for question, calls in questions.items():
        served[(guild, person, question)] = (calls, 0)  # the service reports no tokens
    return served


def totals(served: Served) -> tuple[int, int]:
    return sum(c for c, _ in served.values()), sum(t for _, t in served.values())


def figures(line: str) -> tuple[int, int]:
    found = re.search(r"(\d+) calls?, (\d+) tokens", line)
    assert found is not None, line
    return int(found[1]), int(found[2])


async def test_bot_usage_and_get_usage_agree_with_what_the_fakes_served(
    stack: Stack, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="app.commands.staff")
    alice = await served_while(
        stack,
        GUILD,
        ALICE,
        message_create(content=f"{MENTION} hello", author_id=ALICE),
        message_create(content=f"{MENTION} and again", author_id=ALICE),
    )
    bob = await served_while(
        stack,
        GUILD,
        BOB,
        message_create(content=f"{MENTION} hey", author_id=BOB, author_name="bob"),
    )
    carol = await served_while(
        stack,
        None,
        CAROL,
        message_create(content="hi", author_id=CAROL, guild_id=None, channel_id=9),
    )
    assert alice and bob and carol
    guild = alice | bob

    ask = message_create(content="!bot usage", author_id=STAFF, author_name="staff")
    await stack.deliver(ask)
    [answer] = [m["content"] for m in stack.replies() if answers(m, ask)]
    shown = [r for r in caplog.records if r.getMessage() == "staff usage shown"]
    assert [(r.__dict__["staff_id"], r.__dict__["guild_id"]) for r in shown] == [(STAFF, GUILD)]
    for section in periods(answer, "Today", "This month"):  # one day: the same figures
        assert figures(section[0]) == totals(guild)  # Carol's DM is not this guild's
        purposes = {line[2:].split(":")[0]: figures(line) for line in section[1:-1]}
        assert purposes == {
            purpose: totals({k: v for k, v in guild.items() if k[2] == purpose})
            for purpose in {k[2] for k in guild}
        }
        assert section[-1].startswith("People: ")
        assert f"`{ALICE}` {figures_text(totals(alice))}" in section[-1]
        assert f"`{BOB}` {figures_text(totals(bob))}" in section[-1]

    async with httpx.AsyncClient(base_url=stack.api, headers=AUTH) as client:
        everywhere = (await client.get("/usage")).json()
        one_guild = (await client.get("/usage", params={"guildId": GUILD})).json()
        dated = (await client.get("/usage", params={"day": jst_day(utcnow()).isoformat()})).json()
    expected = alice | bob | carol
    assert rows_of(everywhere) == expected
    assert rows_of(dated) == expected
    assert rows_of(one_guild) == guild
    assert everywhere["day"] == jst_day(utcnow()).isoformat() and everywhere["more"] == 0
    calls, tokens = totals(expected)
    total = everywhere["total"]
    assert (total["calls"], total["inputTokens"] + total["outputTokens"]) == (calls, tokens)


def answers(posted: dict[str, Any], frame: dict[str, Any]) -> bool:
    return bool(posted["message_reference"]["message_id"] == frame["d"]["id"])


def periods(answer: str, *titles: str) -> list[list[str]]:
    """The report's lines, one list per period (its title line first)."""
    lines = answer.splitlines()
    starts = [next(i for i, line in enumerate(lines) if line.startswith(t)) for t in titles]
    return [lines[a:b] for a, b in zip(starts, [*starts[1:], len(lines)], strict=True)]


def figures_text(spent: tuple[int, int]) -> str:
    calls, tokens = spent
    return f"{calls} {'call' if calls == 1 else 'calls'}, {tokens} tokens"


def rows_of(body: dict[str, Any]) -> Served:
    return {
        (
            int(r["guildId"]) if r["guildId"] else None,
            int(r["userId"]) if r["userId"] else None,
            r["purpose"],
        ): (r["calls"], r["inputTokens"] + r["outputTokens"])
        for r in body["rows"]
    }


@pytest.mark.parametrize("day", ["2026-02-30", "tomorrow", "2026-1-5", "20261204", ""])
async def test_get_usage_refuses_a_day_that_is_not_yyyy_mm_dd(stack: Stack, day: str) -> None:
    async with httpx.AsyncClient(base_url=stack.api, headers=AUTH) as client:
        response = await client.get("/usage", params={"day": day})
    assert response.status_code == 422
    [error] = response.json()["detail"]
    assert error["loc"] == ["query", "day"] and "YYYY-MM-DD" in error["msg"]


async def test_get_usage_needs_the_admin_secret(stack: Stack) -> None:
    async with httpx.AsyncClient(base_url=stack.api) as client:
        assert (await client.get("/usage")).status_code == 401


DAY = date(2026, 12, 4)


def spent(calls: int, tokens_in: int, tokens_out: int, estimated: int = 0) -> PurposeSpend:
    return PurposeSpend(calls, tokens_in, tokens_out, estimated)


async def test_usage_rows_stay_one_per_day_guild_person_and_purpose(
    sessions: SessionFactory,
) -> None:
    first = {
        UsageKey(DAY, GUILD, ALICE, "reply"): spent(1, 100, 7),
        UsageKey(DAY, None, ALICE, "reply"): spent(1, 50, 7, estimated=1),
        UsageKey(DAY, GUILD, None, "episode"): spent(1, 30, 7),
    }
    for _ in range(3):
        async with unit_of_work(sessions) as session:
            await store.add(session, first)
    async with sessions() as session:
        assert await session.scalar(select(func.count()).select_from(ModelUsage)) == 3
        rows, total, count = await store.day_rows(session, DAY, EVERYWHERE, limit=10)
        person = await store.person_tokens(session, DAY, ALICE)
        guild = await store.guild_tokens(session, DAY, GUILD)
        dms = await store.guild_tokens(session, DAY, store.NONE)
    assert count == 3 and total == Spent(9, 540, 63, estimated_calls=3)
    assert [(r.guild_id, r.user_id, r.purpose, r.spent) for r in rows] == [
        (GUILD, ALICE, "reply", Spent(3, 300, 21)),
        (None, ALICE, "reply", Spent(3, 150, 21, estimated_calls=3)),
        (GUILD, None, "episode", Spent(3, 90, 21)),
    ]
    assert (person, guild) == (321 + 171, 321 + 111)  # hers everywhere; the guild's, all
    assert dms == 171


async def test_an_erased_persons_usage_stays_in_the_totals_as_nobodys(
    sessions: SessionFactory,
) -> None:
    async with unit_of_work(sessions) as session:
        await store.add(
            session,
            {
                UsageKey(DAY, GUILD, ALICE, "reply"): spent(2, 100, 10, estimated=1),
                UsageKey(DAY, GUILD, None, "reply"): spent(1, 40, 4, estimated=1),
                UsageKey(DAY, GUILD, BOB, "reply"): spent(1, 60, 6),
            },
        )
    async with unit_of_work(sessions) as session:
        assert await store.forget_person(session, ALICE) == 1
    async with sessions() as session:
        rows, total, _ = await store.day_rows(session, DAY, GUILD, limit=10)
    assert total == Spent(4, 200, 20, estimated_calls=2)
    assert {(r.user_id, r.spent) for r in rows} == {
        (None, Spent(3, 140, 14, estimated_calls=2)),
        (BOB, Spent(1, 60, 6)),
    }


def test_calls_for_someone_erased_meanwhile_are_written_as_nobodys() -> None:
    usage = {
        UsageKey(DAY, GUILD, ALICE, "reply"): spent(1, 10, 1, estimated=1),
        UsageKey(DAY, GUILD, None, "reply"): spent(1, 5, 1),
        UsageKey(DAY, GUILD, BOB, "reply"): spent(1, 7, 1),
    }
    assert without(usage, {ALICE}) == {
        UsageKey(DAY, GUILD, None, "reply"): spent(2, 15, 2, estimated=1),
        UsageKey(DAY, GUILD, BOB, "reply"): spent(1, 7, 1),
    }


def test_the_tokens_of_someone_erased_meanwhile_are_kept_by_person_and_day() -> None:
    later = date(2026, 12, 2)
    usage = {
        UsageKey(DAY, GUILD, ALICE, "reply"): spent(1, 10, 1),
        UsageKey(DAY, None, ALICE, "worth_keeping"): spent(1, 5, 0),
        UsageKey(later, GUILD, ALICE, "reply"): spent(1, 3, 1),
        UsageKey(DAY, GUILD, BOB, "reply"): spent(1, 7, 1),
    }
    assert tokens_of(usage, {ALICE}) == {(ALICE, DAY): 16, (ALICE, later): 4}


async def test_what_an_erasure_keeps_for_the_budgets_counts_until_it_no_longer_does(
    sessions: SessionFactory,
) -> None:
    now = utcnow()
    today = jst_day(now)
    async with unit_of_work(sessions) as session:
        await register.start(session, ALICE, requested_by=register.RequestedBy.ADMIN)
        await register.keep_tokens(session, ALICE, today, 120)
        await register.keep_tokens(session, ALICE, today, 30)  # a late job's: added
        await register.keep_task_grants(
            session, ALICE, [now - timedelta(minutes=50), now - timedelta(minutes=10)]
        )
    async with sessions() as session:
        assert await register.kept_tokens(session, ALICE, today) == 150
        assert await register.kept_tokens(session, ALICE, today - timedelta(days=1)) == 0
        assert await register.kept_tokens(session, BOB, today) == 0
        half_hour_ago = now - timedelta(minutes=30)
        assert await register.kept_task_grants(session, ALICE, since=half_hour_ago) == 1
    async with unit_of_work(sessions) as session:  # today: both still count
        assert await register.drop_spent(session, today=today, hour_ago=now) == 0
    async with unit_of_work(sessions) as session:  # the next day, an hour on
        later = now + timedelta(days=1)
        assert (
            await register.drop_spent(
                session, today=jst_day(later), hour_ago=later - timedelta(hours=1)
            )
            == 1
        )
    async with sessions() as session:
        assert await register.kept_tokens(session, ALICE, today) == 0


def test_bot_usage_parses_as_a_staff_command_and_takes_no_arguments() -> None:
    assert parse_command("!bot usage", BOT_ID) == StaffUsage()
    assert parse_command("!BOT Usage ", BOT_ID) == StaffUsage()
    assert parse_command("!bot usage everything", BOT_ID) == Usage(STAFF_USAGE)
    assert "`!bot usage`" in STAFF_USAGE


def test_the_usage_report_names_people_by_id_and_says_when_nothing_was_spent() -> None:
    empty = store.Summary(Spent(), [], [], 0)
    busy = store.Summary(
        Spent(3, 900, 21),
        [("reply", Spent(1, 900, 21)), ("emoji_choice", Spent(2, 0, 0))],
        [(ALICE, Spent(2, 600, 14)), (None, Spent(1, 300, 7))],
        4,
    )
    report = format_usage(DAY, busy, empty, everywhere=False).splitlines()
    assert report == [
        "**Model usage in this server** (JST)",
        "Today, 2026-12-04: 3 calls, 921 tokens",
        "• reply: 1 call, 921 tokens",
        "• emoji_choice: 2 calls, 0 tokens",
        f"People: `{ALICE}` 2 calls, 614 tokens · no one in particular 1 call, 307 tokens"
        " · and 4 more",
        "This month, since 2026-12-01: no model calls.",
    ]
    assert "every server and DM" in format_usage(DAY, empty, empty, everywhere=True)
