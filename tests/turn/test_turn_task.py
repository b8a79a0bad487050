"""The task agent inside the turn, end to end (webhook → real worker → turn → agent) against
the fakes: who may run commands, the time the agent gets, its answer recorded before it is
used (a retried job never runs the agent again), and the per-person hourly task limit."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from prometheus_client import REGISTRY
from pydantic import SecretStr
from sqlalchemy import text

from app.agent.fake_jina import FakeJina
from app.chat.fake import Delay, Reply, Text, ToolUse
from app.config import SandboxBackend, Settings
from app.db import SessionFactory
from app.decision.vocabulary import Question
from app.turn.events import handle_event
from app.turn.limits import OVER_BUDGET
from app.turn.pipeline import TASK_LIMITED
from app.usage.budget import Budget
from app.wiring import open_services
from tests.support.frames import GUILD_ID, message_create
from tests.support.inbox import enqueue_due_now, inbox_row, make_due
from tests.support.providers import BOTH_PROVIDERS
from tests.support.servers import serve
from tests.support.stack import BOT_ID, Stack, running_stack
from tests.support.waiting import wait_until
from tests.support.worker import drain

pytestmark = BOTH_PROVIDERS

MENTION = f"<@{BOT_ID}>"
ALICE, BOB = 2001, 2002
TASK_ANSWER = "Done: the release is on the 7th."
WRITTEN = "Here is my usual written reply."

StackFactory = Callable[..., Any]


def is_agent_call(body: dict[str, Any]) -> bool:
    return "tools" in body  # the written reply's call offers no tools


def agent_calls(stack: Stack) -> list[dict[str, Any]]:
    return [body for body in stack.model.requests if is_agent_call(body)]


def answering(agent: Reply) -> Callable[[dict[str, Any]], Reply]:
    """The agent's calls get ``agent``, the written reply's call gets WRITTEN."""
    return lambda body: agent if is_agent_call(body) else Text(WRITTEN)


@pytest.fixture
async def task_stack(
    settings: Settings, sessions: SessionFactory, redis: object, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[Callable[..., Any]]:
    """A stack whose worker builds the task agent (web tools on a fake Jina); Jev calls
    every mention a task. Call it with setting overrides."""
    jina = FakeJina()
    async with serve(jina.app) as jina_url:

        def open_stack(**overrides: Any) -> Any:
            return running_stack(
                settings,
                monkeypatch,
                jina_api_key=SecretStr(jina.api_key),
                jina_search_url=f"{jina_url}/search",
                jina_reader_url=f"{jina_url}/reader",
                **overrides,
            )

        yield open_stack


def task_message(content: str, author_id: int = ALICE, channel_id: int = 300) -> dict[str, Any]:
    name = "alice" if author_id == ALICE else "bob"
    return message_create(
        content=f"{MENTION} {content}", author_id=author_id, author_name=name, channel_id=channel_id
    )


def prepare(stack: Stack, agent: Reply) -> None:
    stack.jev.answers[Question.IS_TASK] = True
    stack.model.responder = answering(agent)


async def test_only_staff_are_offered_run_command_on_the_local_backend(
    task_stack: StackFactory, tmp_path: Path
) -> None:
    local = {
        "sandbox_backend": SandboxBackend.LOCAL,
        "sandbox_local_unsafe": True,
        "sandbox_root": str(tmp_path),
        "staff_user_ids": [ALICE],
    }
    async with task_stack(**local) as stack:
        prepare(stack, Text(TASK_ANSWER))
        await stack.deliver(task_message("list the files", ALICE, channel_id=301))
        await stack.deliver(task_message("list the files", BOB, channel_id=302))
        staff, member = agent_calls(stack)
    assert "run_command" in {tool["name"] for tool in staff["tools"]}
    assert "run_command" not in {tool["name"] for tool in member["tools"]}


async def test_the_agent_gets_only_the_time_the_job_can_spare(task_stack: StackFactory) -> None:
    # The job has 100 s; a written reply may take CHAT_TIMEOUT_S (85 here) plus a 10 s margin,
    # so the agent gets about 5 s, not its own 75 s: its slow answer is abandoned.
    async with task_stack(chat_timeout_s=85.0) as stack:
        prepare(stack, Delay(30, Text("an answer far too late")))
        started = time.monotonic()
        await stack.deliver(task_message("research this for a long while"))
        elapsed = time.monotonic() - started
    assert [reply["content"] for reply in stack.replies()] == [WRITTEN]
    assert len(agent_calls(stack)) == 1
    assert elapsed < 25


REFUSE_REPLY_TEXT = [
    """
    CREATE FUNCTION refuse_reply_text() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        IF NEW.step = 'reply-text' THEN RAISE EXCEPTION 'injected: reply-text refused'; END IF;
        RETURN NEW;
    END $$
    """,
    """
    CREATE TRIGGER refuse_reply_text BEFORE INSERT ON completed_steps
    FOR EACH ROW EXECUTE FUNCTION refuse_reply_text()
    """,
]
ALLOW_REPLY_TEXT = [
    "DROP TRIGGER IF EXISTS refuse_reply_text ON completed_steps",
    "DROP FUNCTION IF EXISTS refuse_reply_text()",
]


async def run_sql(sessions: SessionFactory, statements: list[str]) -> None:
    async with sessions() as session, session.begin():
        for statement in statements:
            await session.execute(text(statement))


async def test_a_job_failing_after_the_agent_answered_never_runs_the_agent_again(
    task_stack: StackFactory, sessions: SessionFactory
) -> None:
    frame = task_message("find the release date")
    event_id = frame["d"]["id"]
    async with task_stack() as stack:
        prepare(stack, Text(TASK_ANSWER))
        # Postgres refuses to fix the reply text: the job fails right after the agent answered
        # (the reply, posted while its text's record was written, is out already).
        await run_sql(sessions, REFUSE_REPLY_TEXT)
        try:
            await stack.deliver(frame)
        finally:
            await run_sql(sessions, ALLOW_REPLY_TEXT)
        failed = await inbox_row(sessions, event_id)
        assert failed.handled_at is None and failed.last_error is not None
        assert len(stack.replies()) == 1 and len(agent_calls(stack)) == 1

        await make_due(sessions, event_id)  # the retry, as the sweeper runs it
        assert await enqueue_due_now(sessions, stack.settings.redis_url) == 1
        await drain(stack.settings)

    assert len(agent_calls(stack)) == 1
    [reply] = stack.replies()
    assert reply["content"] == TASK_ANSWER
    assert (await inbox_row(sessions, event_id)).handled_at is not None


async def test_a_job_killed_after_the_agent_gave_no_answer_writes_the_reply_without_it(
    task_stack: StackFactory, sessions: SessionFactory
) -> None:
    frame = task_message("do something impossible")
    event_id = frame["d"]["id"]
    async with task_stack() as stack:
        # The agent gives nothing; the written reply's first call hangs until the job dies.
        prepare(stack, Text(""))
        stack.model.push(Text(""), Delay(30, Text("never delivered")))
        await stack.post(frame)
        async with open_services(stack.settings) as services:
            job = asyncio.create_task(handle_event(services, event_id))
            await wait_until(
                lambda: len(stack.model.requests) >= 2, within=10, what="the written reply's call"
            )
            job.cancel()  # the worker dies while the written reply is generated
            await asyncio.gather(job, return_exceptions=True)
            await handle_event(services, event_id)  # the retry

    assert len(agent_calls(stack)) == 1
    assert [reply["content"] for reply in stack.replies()] == [WRITTEN]


async def test_past_the_hourly_limit_a_person_gets_a_polite_reply_and_no_task(
    task_stack: StackFactory,
) -> None:
    limited = REGISTRY.get_sample_value("task_requests_total", {"outcome": "rate_limited"}) or 0
    async with task_stack(tasks_per_user_per_hour=2) as stack:
        prepare(stack, Text(TASK_ANSWER))
        for n in range(3):  # each on a fresh worker: the count lives in Postgres
            await stack.deliver(task_message(f"task number {n}"))
        await stack.deliver(task_message("my first task", BOB))

    replies = [reply["content"] for reply in stack.replies()]
    assert replies == [TASK_ANSWER, TASK_ANSWER, TASK_LIMITED, TASK_ANSWER]
    assert len(agent_calls(stack)) == 3  # Alice twice, Bob once
    after = REGISTRY.get_sample_value("task_requests_total", {"outcome": "rate_limited"})
    assert after == limited + 1


async def test_forgetme_does_not_give_back_the_hours_tasks(
    task_stack: StackFactory, sessions: SessionFactory
) -> None:
    async with task_stack(tasks_per_user_per_hour=1) as stack:
        prepare(stack, Text(TASK_ANSWER))
        await stack.deliver(task_message("find the release date"))
        await stack.deliver(message_create(content="!forgetme", author_id=ALICE))
        async with sessions() as session:  # her step records went with her messages
            steps = await session.scalar(
                text("SELECT count(*) FROM completed_steps WHERE step = 'task-grant'")
            )
        assert steps == 0
        await stack.deliver(task_message("and another one"))

    replies = [r["content"] for r in stack.replies() if r["content"] in (TASK_ANSWER, TASK_LIMITED)]
    assert replies == [TASK_ANSWER, TASK_LIMITED]
    assert len(agent_calls(stack)) == 1
    receipt = "\n".join(m["content"] for m in stack.discord.dms_to(ALICE))
    assert "1 task you asked for in the last hour" in receipt


# -- every step metered (issue 30, HIGH) ------------------------------------------------------

AUTH = {"Authorization": "Bearer test-admin-secret-8c2e4a6f1d3b5907"}


def searching_then(final: Reply, searches: int) -> Callable[[dict[str, Any]], Reply]:
    """The agent searches ``searches`` times, then answers ``final``; the written reply's
    call gets WRITTEN."""
    agent = iter([*(ToolUse("web_search", {"query": f"q{n}"}) for n in range(searches)), final])
    return lambda body: next(agent, final) if is_agent_call(body) else Text(WRITTEN)


async def usage_rows(stack: Stack) -> dict[tuple[str | None, str | None, str], tuple[int, int]]:
    """GET /usage for today: (guild, person, purpose) -> (calls, tokens)."""
    async with httpx.AsyncClient(base_url=stack.api, headers=AUTH) as client:
        body = (await client.get("/usage")).json()
    return {
        (r["guildId"], r["userId"], r["purpose"]): (
            r["calls"],
            r["inputTokens"] + r["outputTokens"],
        )
        for r in body["rows"]
    }


def served_to_agent(stack: Stack) -> tuple[int, int]:
    """The agent's calls the fake answered, and the tokens it reported for them."""
    tokens = [
        i + o
        for body, (i, o) in zip(stack.model.requests, stack.model.served, strict=True)
        if is_agent_call(body)
    ]
    return len(tokens), sum(tokens)


async def test_every_agent_step_is_a_task_call_in_get_usage(task_stack: StackFactory) -> None:
    async with task_stack(memory_consolidate_every=1000) as stack:
        stack.jev.answers[Question.IS_TASK] = True
        stack.model.responder = searching_then(Text(TASK_ANSWER), searches=2)
        await stack.deliver(task_message("find the release date"))
        rows = await usage_rows(stack)

    assert [reply["content"] for reply in stack.replies()] == [TASK_ANSWER]
    steps = served_to_agent(stack)
    assert steps[0] == 3  # two searches and the answer
    assert rows[(str(GUILD_ID), str(ALICE), "task")] == steps


@pytest.mark.parametrize(
    ("cap", "budget"),
    [("daily_tokens_per_user", Budget.PERSON), ("daily_tokens_per_guild", Budget.GUILD)],
)
async def test_a_task_stops_at_the_daily_cap_with_the_budget_notice(
    task_stack: StackFactory, cap: str, budget: Budget
) -> None:
    # Nothing is spent before the task, so its first step is allowed; its tokens pass the cap
    # of one, so the second step is refused before it is sent, and no written reply follows.
    async with task_stack(memory_consolidate_every=1000, **{cap: 1}) as stack:
        stack.jev.answers[Question.IS_TASK] = True
        stack.model.responder = searching_then(Text(TASK_ANSWER), searches=7)
        await stack.deliver(task_message("search until you are stopped"))
        rows = await usage_rows(stack)

    assert [reply["content"] for reply in stack.replies()] == [OVER_BUDGET[budget]]
    assert len(stack.model.requests) == 1  # the one step, no written reply
    assert rows[(str(GUILD_ID), str(ALICE), "task")] == served_to_agent(stack)
    refused = REGISTRY.get_sample_value(
        "model_calls_total", {"purpose": "task", "outcome": "over_budget"}
    )
    assert refused is not None and refused >= 1
