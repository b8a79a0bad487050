"""MEM-09 against a write path in flight: words read before `!forgetme` never come back."""

from __future__ import annotations

import asyncio

from app.chat.fake import Delay, Text
from app.config import Settings
from app.db import SessionFactory
from app.decision.vocabulary import Question
from app.memory.write_path import run_write_path
from app.vocabulary import Actor
from tests.support.erasure import erase_now
from tests.support.memory_env import exchange, fact, memories_of, memory_env
from tests.support.waiting import wait_until

ALICE = 42


async def test_mem09_an_extraction_in_flight_writes_nothing_after_the_erasure(
    settings: Settings, sessions: SessionFactory
) -> None:
    async with memory_env(settings, sessions) as env:
        env.jev.answers[Question.WORTH_KEEPING] = 0.9
        env.model.push(Delay(1.0, Text(fact("Alice bakes sourdough on Sundays."))))
        run = asyncio.create_task(
            run_write_path(
                env.services,
                exchange(ALICE, "Alice", "I bake sourdough every Sunday"),
                actor=Actor.EXTRACTION,
                trigger="reply:1",
            )
        )
        await wait_until(lambda: bool(env.model.requests), within=10, what="the writer's call")
        await erase_now(env.services, ALICE)
        outcome = await run
    assert outcome.stopped == "erased"
    assert outcome.added == []
    assert await memories_of(sessions, ALICE) == {}
