"""Per-person limits end to end (webhook → real worker → Postgres and Redis → fakes): turns
and commands per minute, the day's token budgets, and Discord's error budget. Past a limit no
model or decision is asked, the person hears one short notice, and the event is done."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from typing import Any

import pytest
from prometheus_client import REGISTRY
from sqlalchemy import text

from app.commands.answer import DM_FAILED
from app.commands.limits import COMMANDS_LIMITED
from app.config import Settings
from app.db import SessionFactory
from app.decision.vocabulary import Question
from app.discord.fake import FakeDiscord
from app.turn.limits import OVER_BUDGET, TURNS_LIMITED
from app.usage.budget import Budget
from tests.support.frames import message_create
from tests.support.inbox import inbox_row
from tests.support.providers import BOTH_PROVIDERS
from tests.support.stack import BOT_ID, Stack, running_stack

pytestmark = BOTH_PROVIDERS

MENTION = f"<@{BOT_ID}>"
ALICE, BOB = 2001, 2002
CHANNEL, GUILD = 300, 500
REPLY = "Hello from the model!"

StackFactory = Callable[..., AbstractAsyncContextManager[Stack]]


@pytest.fixture
def open_stack(
    settings: Settings, sessions: SessionFactory, redis: object, monkeypatch: pytest.MonkeyPatch
) -> StackFactory:
    """A stack with setting overrides. Consolidation is kept out of the way, so every chat
    request is a turn's reply."""

    def opened(**overrides: Any) -> AbstractAsyncContextManager[Stack]:
        overrides.setdefault("memory_consolidate_every", 1000)
        return running_stack(settings, monkeypatch, **overrides)

    return opened


def mention(author_id: int, name: str, text: str = "hi!", **kwargs: Any) -> dict[str, Any]:
    return message_create(
        content=f"{MENTION} {text}", author_id=author_id, author_name=name, **kwargs
    )


def replies_to(stack: Stack, frame: dict[str, Any]) -> list[str]:
    """The texts the bot posted in answer to ``frame``'s message."""
    mid = frame["d"]["id"]
    return [
        m["content"]
        for m in stack.discord.posted
        if (m.get("message_reference") or {}).get("message_id") == mid
    ]


def counter(name: str, **labels: str) -> float:
    return REGISTRY.get_sample_value(name, labels) or 0.0


async def test_a_flood_of_mentions_reaches_the_model_at_most_the_limit_and_gets_one_notice(
    open_stack: StackFactory, sessions: SessionFactory
) -> None:
    async with open_stack(turns_per_user_per_minute=12) as stack:
        flood = [mention(ALICE, "alice", f"message {i}") for i in range(25)]
        bob = mention(BOB, "bob", "and me?")
        for frame in flood[:12]:
            await stack.post(frame)
        await stack.post(bob)
        await stack.deliver(*flood[12:])

        answered = [f for f in flood if replies_to(stack, f) == [REPLY]]
        notices = [f for f in flood if replies_to(stack, f) == [TURNS_LIMITED]]
        assert len(answered) == 12
        assert len(notices) == 1
        assert all(replies_to(stack, f) == [] for f in flood if f not in answered + notices)
        assert replies_to(stack, bob) == [REPLY]  # another person is answered meanwhile
        # The refused 13 asked no model and no decision: 12 + Bob's replies, and for each
        # of those the reaction's two decisions and the memory job's worth_keeping.
        assert len(stack.model.requests) == 13
        assert len(stack.jev.requests) == 13 * 3
        for frame in flood:  # every event is done at its first attempt: none is retried
            row = await inbox_row(sessions, frame["d"]["id"])
            assert row.handled_at is not None and row.attempts == 1


async def test_a_person_over_the_daily_token_budget_gets_a_notice_and_no_model_call(
    open_stack: StackFactory,
) -> None:
    async with open_stack(daily_tokens_per_user=1) as stack:
        first, second, third = (mention(ALICE, "alice", f"try {i}") for i in range(3))
        await stack.deliver(first)
        assert replies_to(stack, first) == [REPLY]  # its tokens pass the cap of one
        asked = len(stack.model.requests), len(stack.jev.requests)

        await stack.deliver(second, third)
        answers = sorted([replies_to(stack, second), replies_to(stack, third)])
        assert answers == [[], [OVER_BUDGET[Budget.PERSON]]]  # one notice an hour
        assert (len(stack.model.requests), len(stack.jev.requests)) == asked

        bob = mention(BOB, "bob")
        await stack.deliver(bob)
        assert replies_to(stack, bob) == [REPLY]  # a person's budget is theirs


async def test_a_guild_over_its_daily_token_budget_answers_with_a_notice_but_dms_go_on(
    open_stack: StackFactory,
) -> None:
    async with open_stack(daily_tokens_per_guild=1) as stack:
        alice = mention(ALICE, "alice")
        await stack.deliver(alice)
        assert replies_to(stack, alice) == [REPLY]
        asked = len(stack.model.requests)

        bob = mention(BOB, "bob")
        await stack.deliver(bob)
        assert replies_to(stack, bob) == [OVER_BUDGET[Budget.GUILD]]
        assert len(stack.model.requests) == asked

        dm = message_create(content="hi in private", author_id=BOB, guild_id=None, channel_id=77)
        await stack.deliver(dm)
        assert replies_to(stack, dm) == [REPLY]  # a DM has no guild to pay


async def test_commands_over_the_limit_are_not_run_and_get_one_notice(
    open_stack: StackFactory, sessions: SessionFactory
) -> None:
    async with open_stack(commands_per_user_per_minute=3) as stack:
        frames = [message_create(content="!memory show", author_id=ALICE) for _ in range(6)]
        await stack.deliver(*frames)
        answers = [replies_to(stack, f) for f in frames]
        assert sum(1 for a in answers if a and a != [COMMANDS_LIMITED]) == 3
        assert answers.count([COMMANDS_LIMITED]) == 1
        assert answers.count([]) == 2
        for frame in frames:
            row = await inbox_row(sessions, frame["d"]["id"])
            assert row.handled_at is not None


async def test_a_closed_dm_is_asked_once_and_then_backed_off(open_stack: StackFactory) -> None:
    discord = FakeDiscord(bot_user_id=BOT_ID)
    discord.dm_closed.add(ALICE)
    refused_before = counter(
        "discord_refused_total", route="POST /channels/{channel_id}/messages", status="403"
    )
    skipped_before = counter(
        "discord_skipped_total", route="POST /channels/{channel_id}/messages", status="403"
    )
    async with open_stack(discord=discord) as stack:
        frames = [message_create(content="!memory search tea", author_id=ALICE) for _ in range(4)]
        await stack.deliver(*frames)

        dm_channel = discord.dm_channels[ALICE]
        attempts = discord.calls_to("POST", f"/channels/{dm_channel}/messages")
        assert [c.status for c in attempts] == [403]  # one refusal, then no more asking
        assert [replies_to(stack, f) for f in frames] == [[DM_FAILED]] * 4
    route = "POST /channels/{channel_id}/messages"
    assert counter("discord_refused_total", route=route, status="403") == refused_before + 1
    assert counter("discord_skipped_total", route=route, status="403") == skipped_before + 3


async def test_a_command_whose_answer_discord_refuses_is_not_retried(
    open_stack: StackFactory, sessions: SessionFactory
) -> None:
    discord = FakeDiscord(bot_user_id=BOT_ID)
    discord.missing_access.add(CHANNEL)
    async with open_stack(discord=discord) as stack:
        first, second = (message_create(content="!memory show", author_id=ALICE) for _ in "ab")
        await stack.deliver(first, second)

        posts = discord.calls_to("POST", f"/channels/{CHANNEL}/messages")
        assert [c.status for c in posts] == [403]  # the second answer was not even tried
        for frame in (first, second):
            row = await inbox_row(sessions, frame["d"]["id"])
            assert row.handled_at is not None and row.dead_at is None and row.attempts == 1


async def test_a_reply_to_the_bot_counts_against_the_turn_limit(
    open_stack: StackFactory,
) -> None:
    async with open_stack(turns_per_user_per_minute=1) as stack:
        first = mention(ALICE, "alice")
        await stack.deliver(first)
        [posted] = stack.discord.posted
        correcting = message_create(content="that's wrong", author_id=ALICE, reply_to=posted)
        await stack.deliver(correcting)
        assert stack.jev.asked(Question.IS_CORRECTION) == []
        assert replies_to(stack, correcting) == []  # not addressed: no notice either

        bob = message_create(content="that's wrong", author_id=BOB, reply_to=posted)
        await stack.deliver(bob)
        assert len(stack.jev.asked(Question.IS_CORRECTION)) == 1  # within Bob's limit


async def test_forgetme_then_a_new_dm_over_the_days_cap_is_refused(
    open_stack: StackFactory, sessions: SessionFactory
) -> None:
    async with open_stack(daily_tokens_per_user=1) as stack:

        def dm(text: str) -> dict[str, Any]:
            return message_create(content=text, author_id=ALICE, guild_id=None, channel_id=77)

        first = dm("hi in private")
        await stack.deliver(first)
        assert replies_to(stack, first) == [REPLY]  # its tokens pass the cap of one
        await stack.deliver(dm("!forgetme"))
        asked = len(stack.model.requests), len(stack.jev.requests)

        again = dm("hello again")
        await stack.deliver(again)

        assert replies_to(stack, again) == [OVER_BUDGET[Budget.PERSON]]
        assert (len(stack.model.requests), len(stack.jev.requests)) == asked
        async with sessions() as session:  # the number stays; her id leaves the usage rows
            rows = await session.scalar(
                text("SELECT count(*) FROM model_usage WHERE user_id = :u"), {"u": ALICE}
            )
            kept = await session.scalar(
                text("SELECT kept FROM erasures WHERE user_id = :u"), {"u": ALICE}
            )
        assert rows == 0 and kept["tokens"] > 0
        receipt = "\n".join(m["content"] for m in stack.discord.dms_to(ALICE))
        assert f"the tokens you used today ({kept['tokens']:,})" in receipt
