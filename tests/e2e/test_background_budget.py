"""Spend that nobody addressed is bounded too (webhook → real worker → Postgres and Redis →
fakes): unaddressed messages feed the channel's consolidation (an episode, the authors' memory
write paths), which stops once the guild's day is paid for, and which no single person's
flood can set off by itself."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from typing import Any

import pytest
from sqlalchemy import text

from app.config import Settings
from app.db import SessionFactory
from app.structured.consolidation import EPISODE_SYSTEM
from tests.support.frames import message_create, next_id
from tests.support.providers import BOTH_PROVIDERS
from tests.support.stack import BOT_ID, Stack, running_stack

pytestmark = BOTH_PROVIDERS

ALICE, BOB, CAROL, DAVE = 2001, 2002, 2003, 2004
NAMES = {ALICE: "alice", BOB: "bob", CAROL: "carol", DAVE: "dave"}

StackFactory = Callable[..., AbstractAsyncContextManager[Stack]]


@pytest.fixture
def open_stack(
    settings: Settings, sessions: SessionFactory, redis: object, monkeypatch: pytest.MonkeyPatch
) -> StackFactory:
    def opened(**overrides: Any) -> AbstractAsyncContextManager[Stack]:
        return running_stack(settings, monkeypatch, memory_consolidate_every=20, **overrides)

    return opened


def chatter(*people: int, each: int) -> list[dict[str, Any]]:
    """``each`` plain (unaddressed) messages from every one of ``people``, interleaved."""
    return [
        message_create(
            content=f"just chatting, line {n}",
            author_id=person,
            author_name=NAMES[person],
            message_id=next_id(),
        )
        for n in range(each)
        for person in people
    ]


def episode_calls(stack: Stack) -> int:
    return sum(1 for body in stack.model.requests if body["system"][0]["text"] == EPISODE_SYSTEM)


async def unconsumed(sessions: SessionFactory) -> int:
    async with sessions() as session:
        found = await session.scalar(
            text("SELECT count(*) FROM observations WHERE consumed_at IS NULL")
        )
    return int(found or 0)


async def test_sixty_unaddressed_messages_in_a_guild_over_budget_ask_no_model(
    open_stack: StackFactory, sessions: SessionFactory
) -> None:
    async with open_stack(daily_tokens_per_guild=1) as stack:
        asked = message_create(content=f"<@{BOT_ID}> hello!", author_id=DAVE, author_name="dave")
        await stack.deliver(asked)  # its tokens pass the guild's cap of one
        calls = len(stack.model.requests), len(stack.jev.requests)

        await stack.deliver(*chatter(ALICE, BOB, CAROL, each=20))

        assert (len(stack.model.requests), len(stack.jev.requests)) == calls
        assert await unconsumed(sessions) == 62  # they wait for a day with budget left


async def test_one_persons_flood_never_sets_off_a_consolidation_alone(
    open_stack: StackFactory, sessions: SessionFactory
) -> None:
    async with open_stack() as stack:
        await stack.deliver(*chatter(ALICE, each=60))

        assert stack.model.requests == [] and stack.jev.requests == []
        await stack.deliver(*chatter(BOB, CAROL, each=5))  # others talk: 10 + 5 + 5

        assert episode_calls(stack) == 1
