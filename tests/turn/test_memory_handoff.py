"""Step 11 is durable: a memory job lost with Redis is re-enqueued once its reply is posted."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import pytest
from sqlalchemy import select

from app.chat.fake import Text
from app.config import Settings
from app.db import SessionFactory
from app.decision.vocabulary import Question
from app.memory.jobs import REMEMBER, resume_lost_memory_jobs
from app.models.memory import Memory
from app.turn.events import handle_event
from app.wiring import open_services
from tests.support.frames import message_create
from tests.support.queue import InMemoryQueue
from tests.support.stack import BOT_ID, Stack, running_stack
from tests.support.worker import drain

FACT = "Alice is learning the cello."


def _answers(body: dict[str, Any]) -> Text:
    system = " ".join(block["text"] for block in body.get("system", []))
    if "memory note" in system:
        return Text(json.dumps({"subject": "speaker", "fact": FACT}))
    return Text("How lovely!")


@pytest.fixture
async def stack(
    settings: Settings, sessions: SessionFactory, redis: object, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[Stack]:
    async with running_stack(settings, monkeypatch) as running:
        running.model.responder = _answers
        running.jev.answers[Question.WORTH_KEEPING] = 0.9
        yield running


async def memories(sessions: SessionFactory) -> list[str]:
    async with sessions() as session:
        return list((await session.scalars(select(Memory.content))).all())


async def test_a_lost_memory_job_is_enqueued_again_and_runs(
    stack: Stack, sessions: SessionFactory
) -> None:
    frame = message_create(content=f"<@{BOT_ID}> I started cello lessons!")
    await stack.post(frame)
    lost = InMemoryQueue()  # Redis that accepts the job and then loses it
    async with open_services(stack.settings, queue=lost) as services:
        await handle_event(services, frame["d"]["id"])  # the reply goes out; its job is lost
    assert [job for job, _ in lost.calls()] == [REMEMBER.name]
    assert len(stack.replies()) == 1
    assert await memories(sessions) == []

    async with open_services(stack.settings) as services:
        assert await resume_lost_memory_jobs(services, grace_s=0) == 1
    await drain(stack.settings)
    assert await memories(sessions) == [FACT]

    async with open_services(stack.settings) as services:
        assert await resume_lost_memory_jobs(services, grace_s=0) == 0  # it ran: done


async def test_a_memory_job_that_ran_is_not_enqueued_again(
    stack: Stack, sessions: SessionFactory
) -> None:
    await stack.deliver(message_create(content=f"<@{BOT_ID}> I started cello lessons!"))
    assert await memories(sessions) == [FACT]
    async with open_services(stack.settings) as services:
        assert await resume_lost_memory_jobs(services, grace_s=0) == 0
