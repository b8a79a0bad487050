"""MEM-02 on real Postgres, with FakeJev and FakeAnthropic over HTTP: the threshold trigger,
one episode per run, each author through the write path (actor consolidation), consumption
only on success, a per-channel lock that lets one of two concurrent runs through, and caps."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import replace
from typing import Any

import pytest
from sqlalchemy import select

from app.chat.fake import Failure, Reply, Text
from app.config import Settings
from app.consent.service import Learning
from app.db import SessionFactory, unit_of_work
from app.decision.vocabulary import Question
from app.kit.arqueue import create_queue
from app.kit.attribution import read_lines
from app.models.memory import MemoryLog
from app.models.messages import Message
from app.observations.service import observe
from app.observations.store import Kind
from app.structured.consolidation import (
    MAX_OBSERVATIONS,
    consolidate_channel,
    enqueue_if_due,
)
from tests.support.memory_env import BOT_ID, MemoryEnv, all_memories, memory_env
from tests.support.obs_env import (
    episodes_of,
    fact_json,
    is_episode_call,
    observation_rows,
    responder,
    say,
    unconsumed_ids,
    writer_speaker,
)
from tests.support.providers import BOTH_PROVIDERS
from tests.support.servers import free_port

pytestmark = BOTH_PROVIDERS

CHANNEL, OTHER = 500, 501
ALICE, BOB = 11, 22


@pytest.fixture
async def env(settings: Settings, sessions: SessionFactory) -> AsyncIterator[MemoryEnv]:
    tuned = settings.model_copy(update={"memory_consolidate_every": 3})
    async with memory_env(tuned, sessions) as world:
        yield world


def own_fact(body: dict[str, Any]) -> str:
    name = writer_speaker(body)
    return fact_json(f"{name} has a new hobby.")


async def chat(sessions: SessionFactory) -> None:
    """Alice and Bob talk, the bot answers, Bob reacts, Bob deletes a message."""
    await say(
        sessions,
        id=1,
        channel_id=CHANNEL,
        author_id=ALICE,
        author_name="Alice",
        content="I started pottery classes",
    )
    await say(
        sessions, id=2, channel_id=CHANNEL, author_id=BOB, author_name="Bob", content="I run now"
    )
    await say(
        sessions,
        id=3,
        channel_id=CHANNEL,
        author_id=BOT_ID,
        author_name="companion",
        content="Both great hobbies!",
        is_bot=True,
    )
    await say(
        sessions,
        id=4,
        channel_id=CHANNEL,
        author_id=BOB,
        author_name="Bob",
        content="my secret pin is 1234",
    )
    async with unit_of_work(sessions) as session:
        await observe(
            session,
            Learning(True),
            event_id="reaction:1:22:👍:add",
            channel_id=CHANNEL,
            guild_id=1,
            user_id=BOB,
            kind=Kind.REACTION_ADD,
            message_id=1,
            content="👍",
        )
    # Bob deletes message 4: the channel log marks it, and a delete observation follows.
    async with unit_of_work(sessions) as session:
        row = await session.get(Message, 4)
        assert row is not None
        row.deleted_at = row.created_at
        await observe(
            session,
            Learning(True),
            event_id="delete:4",
            channel_id=CHANNEL,
            guild_id=1,
            user_id=BOB,
            kind=Kind.DELETE,
            message_id=4,
            content="",
        )


async def test_mem02_trigger_fires_at_the_threshold(env: MemoryEnv) -> None:
    for n, channel in ((1, CHANNEL), (2, CHANNEL), (3, OTHER)):
        await say(
            env.sessions, id=n, channel_id=channel, author_id=ALICE, author_name="A", content="hi"
        )

    assert await enqueue_if_due(env.services, CHANNEL) is False  # 2 of 3 here
    await say(env.sessions, id=4, channel_id=CHANNEL, author_id=BOB, author_name="B", content="yo")
    assert await enqueue_if_due(env.services, CHANNEL) is True
    assert await enqueue_if_due(env.services, OTHER) is False

    assert [(e.job, e.args, e.job_id) for e in env.queue.jobs] == [
        ("consolidate_channel", (CHANNEL,), "consolidate:500")
    ]


async def test_mem02_run_writes_one_episode_feeds_each_author_and_consumes(
    env: MemoryEnv,
) -> None:
    await chat(env.sessions)
    env.jev.answers[Question.WORTH_KEEPING] = 0.9
    env.model.responder = responder("Alice took up pottery; Bob runs.", own_fact)

    outcome = await consolidate_channel(env.services, CHANNEL)

    assert outcome.status == "done"
    assert outcome.consumed == 6
    assert await unconsumed_ids(env.sessions, CHANNEL) == []
    assert await episodes_of(env.sessions, CHANNEL) == ["Alice took up pottery; Bob runs."]
    [episode_call] = [b for b in env.model.requests if is_episode_call(b)]
    activity = episode_call["messages"][0]["content"]
    events = read_lines(activity)
    assert {"from": "Alice", "text": "I started pottery classes"} in events
    assert {"from": "Bob", "text": "I run now"} in events
    assert {"from": "the bot", "bot": True, "text": "Both great hobbies!"} in events
    assert {"from": "Bob", "did": "reacted 👍 to a message by Alice"} in events
    assert {"from": "Bob", "did": "deleted a message"} in events
    assert "1234" not in activity  # deleted words are never summarised
    owners = {m.user_id: m.content for m in await all_memories(env.sessions)}
    assert owners == {ALICE: "Alice has a new hobby.", BOB: "Bob has a new hobby."}
    async with env.sessions() as session:
        adds = list(await session.scalars(select(MemoryLog).where(MemoryLog.action == "add")))
    assert {(a.user_id, a.actor, a.trigger) for a in adds} == {
        (ALICE, "consolidation", f"consolidation:{CHANNEL}:1-6:{ALICE}"),
        (BOB, "consolidation", f"consolidation:{CHANNEL}:1-6:{BOB}"),
    }


async def test_mem02_second_run_continues_from_the_last_episode(env: MemoryEnv) -> None:
    await chat(env.sessions)
    env.model.responder = responder("First summary.", own_fact)
    await consolidate_channel(env.services, CHANNEL)
    await say(
        env.sessions,
        id=9,
        channel_id=CHANNEL,
        author_id=ALICE,
        author_name="Alice",
        content="the kiln broke",
    )
    env.model.responder = responder("Second summary.", own_fact)

    outcome = await consolidate_channel(env.services, CHANNEL)
    again = await consolidate_channel(env.services, CHANNEL)

    assert (outcome.status, outcome.consumed) == ("done", 1)
    assert again.status == "nothing"
    last_call = [b for b in env.model.requests if is_episode_call(b)][-1]
    request = last_call["messages"][0]["content"]
    assert "Previous summary:\nFirst summary." in request
    assert read_lines(request) == [{"from": "Alice", "text": "the kiln broke"}]
    assert "pottery" not in request  # consumed observations are not read again
    assert await episodes_of(env.sessions, CHANNEL) == ["First summary.", "Second summary."]


async def test_mem02_model_failure_leaves_observations_for_the_next_trigger(
    env: MemoryEnv,
) -> None:
    await chat(env.sessions)
    env.jev.answers[Question.WORTH_KEEPING] = 0.9
    before = await unconsumed_ids(env.sessions, CHANNEL)
    env.model.responder = responder(lambda _: Failure(500), own_fact)

    failed = await consolidate_channel(env.services, CHANNEL)

    assert failed.status == "model_failed"
    assert await unconsumed_ids(env.sessions, CHANNEL) == before
    assert await episodes_of(env.sessions, CHANNEL) == []
    assert await all_memories(env.sessions) == []  # no extraction without the episode
    assert env.jev.requests == []

    env.model.responder = responder("Recovered summary.", own_fact)
    retried = await consolidate_channel(env.services, CHANNEL)

    assert (retried.status, retried.consumed) == ("done", len(before))
    assert await unconsumed_ids(env.sessions, CHANNEL) == []
    assert await episodes_of(env.sessions, CHANNEL) == ["Recovered summary."]


async def test_mem02_concurrent_runs_one_runs_the_other_skips(env: MemoryEnv) -> None:
    await chat(env.sessions)
    started, release = asyncio.Event(), asyncio.Event()

    async def held_episode(body: dict[str, Any]) -> Reply:
        if not is_episode_call(body):
            return Text(own_fact(body))
        started.set()
        await release.wait()  # the first run sits inside its model call, holding the lock
        return Text("Only one summary.")

    env.model.responder = held_episode
    first = asyncio.create_task(consolidate_channel(env.services, CHANNEL))
    await started.wait()

    second = await consolidate_channel(env.services, CHANNEL)
    release.set()
    done = await first

    assert second.status == "busy"
    assert (done.status, done.consumed) == ("done", 6)
    assert len([b for b in env.model.requests if is_episode_call(b)]) == 1
    assert await episodes_of(env.sessions, CHANNEL) == ["Only one summary."]


async def test_mem02_other_channels_are_not_blocked_by_a_running_one(env: MemoryEnv) -> None:
    await chat(env.sessions)
    await say(env.sessions, id=50, channel_id=OTHER, author_id=BOB, author_name="Bob", content="x")
    started, release = asyncio.Event(), asyncio.Event()

    async def hold_first_channel(body: dict[str, Any]) -> Reply:
        if is_episode_call(body) and "pottery" in body["messages"][0]["content"]:
            started.set()
            await release.wait()
        return Text("summary") if is_episode_call(body) else Text(own_fact(body))

    env.model.responder = hold_first_channel
    first = asyncio.create_task(consolidate_channel(env.services, CHANNEL))
    await started.wait()

    other = await consolidate_channel(env.services, OTHER)
    release.set()
    await first

    assert other.status == "done"


async def test_mem02_one_run_reads_a_capped_batch_oldest_first(env: MemoryEnv) -> None:
    async with unit_of_work(env.sessions) as session:
        for n in range(MAX_OBSERVATIONS + 5):
            await observe(
                session,
                Learning(True),
                event_id=f"reaction:{n}",
                channel_id=CHANNEL,
                guild_id=1,
                user_id=BOB,
                kind=Kind.REACTION_ADD,
                message_id=n,
                content="👍",
            )
    env.model.responder = responder("Lots of thumbs.", own_fact)

    outcome = await consolidate_channel(env.services, CHANNEL)

    assert outcome.consumed == MAX_OBSERVATIONS
    rows = await observation_rows(env.sessions, CHANNEL)
    assert [r.id for r in rows if r.consumed_at is None] == [
        MAX_OBSERVATIONS + 1 + i for i in range(5)
    ]


async def test_mem02_redis_down_at_the_trigger_is_logged_not_raised(env: MemoryEnv) -> None:
    for n in range(3):
        await say(
            env.sessions,
            id=n + 1,
            channel_id=CHANNEL,
            author_id=ALICE,
            author_name="A",
            content="x",
        )
    down = create_queue(f"redis://127.0.0.1:{free_port()}/0")  # nothing listens there
    try:
        enqueued = await enqueue_if_due(replace(env.services, queue=down), CHANNEL)
    finally:
        await down.close()

    assert enqueued is False
    assert len(await unconsumed_ids(env.sessions, CHANNEL)) == 3  # kept for the next trigger
