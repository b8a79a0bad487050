"""Estimated usage: an OpenAI-compatible server that reports no ``usage`` is charged an estimate,
and the usage rows say so, so `GET /usage` and `!bot usage` tell which tokens are ours; the
daily caps read the same tokens (webhook → real worker → the OpenAI-compatible fake →
Postgres → the API and the staff command)."""

from __future__ import annotations

import re
from datetime import date
from typing import Any

import httpx
import pytest

from app.chat.fake_openai import FakeOpenAI
from app.commands.usage import format_usage
from app.config import Provider, Settings
from app.db import SessionFactory
from app.kit.clock import jst_day, utcnow
from app.turn.limits import OVER_BUDGET
from app.usage import store
from app.usage.budget import Budget
from app.usage.store import Spent
from tests.support.frames import message_create
from tests.support.stack import BOT_ID, Stack, running_stack

OPENAI = pytest.mark.parametrize("provider", [Provider.OPENAI], indirect=True)

MENTION = f"<@{BOT_ID}>"
ALICE, STAFF = 2001, 2099
GUILD = 500
AUTH = {"Authorization": "Bearer test-admin-secret-8c2e4a6f1d3b5907"}
ESTIMATED = re.compile(r"\((\d+) calls?'s? tokens estimated: the server reported none\)")


def openai_fake(stack: Stack) -> FakeOpenAI:
    assert isinstance(stack.model, FakeOpenAI)
    return stack.model


async def talk_and_ask(stack: Stack) -> tuple[int, str, dict[str, Any]]:
    """Alice talks twice; then the chat calls served, the staff's `!bot usage` answer and
    today's `GET /usage` for the guild."""
    await stack.deliver(
        message_create(content=f"{MENTION} hello", author_id=ALICE),
        message_create(content=f"{MENTION} and again", author_id=ALICE),
    )
    chat_calls = len(openai_fake(stack).served)
    ask = message_create(content="!bot usage", author_id=STAFF, author_name="staff")
    await stack.deliver(ask)
    [answer] = [
        m["content"]
        for m in stack.replies()
        if m["message_reference"]["message_id"] == ask["d"]["id"]
    ]
    async with httpx.AsyncClient(base_url=stack.api, headers=AUTH) as client:
        response = await client.get("/usage", params={"guildId": GUILD})
    assert response.status_code == 200
    body: dict[str, Any] = response.json()
    return chat_calls, answer, body


def reply_row(body: dict[str, Any]) -> dict[str, Any]:
    rows: list[dict[str, Any]] = body["rows"]
    [row] = [r for r in rows if r["userId"] == str(ALICE) and r["purpose"] == "reply"]
    return row


@OPENAI
async def test_a_server_without_usage_shows_its_calls_as_estimated(
    stack: Stack, sessions: SessionFactory
) -> None:
    openai_fake(stack).usage = False
    chat_calls, answer, body = await talk_and_ask(stack)

    assert chat_calls >= 2  # one reply each, at least
    row = reply_row(body)
    assert row["calls"] == row["estimatedCalls"] == chat_calls
    assert row["inputTokens"] > 0 and row["outputTokens"] > 0  # the estimate, charged
    assert body["total"]["estimatedCalls"] == chat_calls
    # The decisions the same jobs asked for are not chat calls: never estimated.
    assert all(r["estimatedCalls"] == 0 for r in body["rows"] if r["purpose"] != "reply")

    today, month = (line for line in answer.splitlines() if line.startswith(("Today", "This")))
    for period in (today, month):
        found = ESTIMATED.search(period)
        assert found is not None, period
        assert int(found[1]) == chat_calls
    assert "reported none" not in "\n".join(
        line for line in answer.splitlines() if not line.startswith(("Today", "This"))
    )

    # The daily caps read these same tokens: estimated ones count like reported ones.
    async with sessions() as session:
        person = await store.person_tokens(session, jst_day(utcnow()), ALICE)
    alice_rows = [r for r in body["rows"] if r["userId"] == str(ALICE)]
    assert person == sum(r["inputTokens"] + r["outputTokens"] for r in alice_rows) > 0


@OPENAI
async def test_a_server_that_reports_usage_shows_none_estimated(stack: Stack) -> None:
    chat_calls, answer, body = await talk_and_ask(stack)

    assert chat_calls >= 2
    row = reply_row(body)
    assert row["calls"] == chat_calls and row["estimatedCalls"] == 0
    served = openai_fake(stack).served
    assert row["inputTokens"] + row["outputTokens"] == sum(i + o for i, o in served)
    assert body["total"]["estimatedCalls"] == 0
    assert "estimated" not in answer


@OPENAI
async def test_estimated_tokens_count_against_the_daily_budget_like_reported_ones(
    settings: Settings, sessions: SessionFactory, redis: object, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with running_stack(
        settings, monkeypatch, daily_tokens_per_user=1, memory_consolidate_every=1000
    ) as stack:
        openai_fake(stack).usage = False
        first = message_create(content=f"{MENTION} hello", author_id=ALICE)
        await stack.deliver(first)
        asked = len(openai_fake(stack).wire)
        assert asked >= 1  # answered: its estimated tokens pass the cap of one

        second = message_create(content=f"{MENTION} again", author_id=ALICE)
        await stack.deliver(second)
        answer = [
            m["content"]
            for m in stack.replies()
            if m["message_reference"]["message_id"] == second["d"]["id"]
        ]
        assert answer == [OVER_BUDGET[Budget.PERSON]]
        assert len(openai_fake(stack).wire) == asked  # no model call past the cap


def test_the_report_says_estimated_only_when_some_are() -> None:
    day = date(2026, 12, 4)
    one = store.Summary(Spent(2, 90, 10, estimated_calls=1), [], [], 0)
    none = store.Summary(Spent(2, 90, 10), [], [], 0)
    assert format_usage(day, one, none, everywhere=False).splitlines()[1:] == [
        "Today, 2026-12-04: 2 calls, 100 tokens"
        " (1 call's tokens estimated: the server reported none)",
        "People: ",
        "This month, since 2026-12-01: 2 calls, 100 tokens",
        "People: ",
    ]
