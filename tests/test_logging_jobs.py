"""Log lines inside a job never break it: commands and the sandbox whose log lines repeat a
context key (channel_id) run end to end through the real webhook, worker and turn."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from typing import Any

import pytest
from sqlalchemy import select

from app.agent.fake_docker import FakeDocker
from app.chat.fake import Text, ToolUse
from app.config import SandboxBackend, Settings
from app.db import SessionFactory
from app.decision.vocabulary import Question
from app.models.inbox import InboxEvent
from app.models.structured import Pin
from tests.support.frames import GUILD_ID, message_create
from tests.support.servers import serve
from tests.support.stack import BOT_ID, Stack, running_stack
from tests.support.worker import drain

STAFF = 2001  # message_create's default author
CHANNEL = 300  # message_create's default channel


async def deliver_one(stack: Stack, frame: dict[str, Any]) -> None:
    """Post one frame, run the real worker, and check no job failed."""
    await stack.post(frame)
    worker = await drain(stack.settings)
    assert worker.jobs_complete >= 1 and worker.jobs_failed == 0


async def handled(sessions: SessionFactory, frame: dict[str, Any]) -> bool:
    async with sessions() as session:
        event = await session.get(InboxEvent, frame["d"]["id"])
    return event is not None and event.handled_at is not None


@pytest.fixture(autouse=True)
def info_logs(caplog: pytest.LogCaptureFixture) -> None:
    """Production logs at info (configure_logging); the bug lived only where records are made."""
    caplog.set_level(logging.INFO)


@pytest.fixture
async def staff_stack(
    settings: Settings, sessions: SessionFactory, redis: object, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[Stack]:
    async with running_stack(settings, monkeypatch, staff_user_ids=[STAFF]) as stack:
        yield stack


async def test_staff_pin_for_a_channel_is_answered_and_its_job_succeeds(
    staff_stack: Stack, sessions: SessionFactory
) -> None:
    frame = message_create(content="!bot pin channel Quiet hours after 23:00")

    await deliver_one(staff_stack, frame)

    async with sessions() as session:
        [pin] = (await session.scalars(select(Pin))).all()
    assert staff_stack.discord.texts_in(CHANNEL) == [f"Pinned for this channel with id {pin.id}."]
    assert await handled(sessions, frame)


async def test_staff_unpin_of_a_channel_pin_is_answered_and_its_job_succeeds(
    staff_stack: Stack, sessions: SessionFactory
) -> None:
    async with sessions() as session, session.begin():
        pin = Pin(
            scope="channel",
            channel_id=CHANNEL,
            guild_id=GUILD_ID,
            content="No spoilers",
            created_by=STAFF,
        )
        session.add(pin)
        await session.flush()
        pin_id = pin.id
    frame = message_create(content=f"!bot unpin {pin_id}")

    await deliver_one(staff_stack, frame)

    assert staff_stack.discord.texts_in(CHANNEL) == [f"Removed pin {pin_id}."]
    async with sessions() as session:
        assert (await session.scalars(select(Pin))).all() == []
    assert await handled(sessions, frame)


async def test_first_docker_sandbox_start_in_a_channel_runs_the_command_and_answers(
    settings: Settings, sessions: SessionFactory, redis: object, monkeypatch: pytest.MonkeyPatch
) -> None:
    docker = FakeDocker()
    async with (
        serve(docker.app) as docker_url,
        running_stack(
            settings,
            monkeypatch,
            sandbox_backend=SandboxBackend.DOCKER,
            docker_url=docker_url,
        ) as stack,
    ):
        stack.jev.answers[Question.IS_TASK] = True
        stack.model.push(
            ToolUse("run_command", {"command": "echo sandbox-ok"}),
            Text("The command printed sandbox-ok."),
        )
        frame = message_create(content=f"<@{BOT_ID}> please run echo sandbox-ok")

        await deliver_one(stack, frame)

    [container] = docker.containers.values()
    assert container.running and len(docker.execs) == 1
    # The command's result went back to the model as a result, not as a tool error.
    [result] = stack.model.requests[1]["messages"][-1]["content"]
    assert result["type"] == "tool_result" and not result.get("is_error")
    assert "echo sandbox-ok" in result["content"]
    assert [m["content"] for m in stack.replies()] == ["The command printed sandbox-ok."]
    assert await handled(sessions, frame)
