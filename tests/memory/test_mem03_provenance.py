"""MEM-03 regressions on real Postgres: "Bob says Alice likes X" never becomes Alice's
memory — in the per-reply path, the nightly path and channel consolidation — whether Alice is
absent from the conversation or present. Jev is told the exchange is worth keeping (the worst
case) and the model answers every writer call with the fact about Alice."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from datetime import timedelta
from typing import Any

import pytest

from app.config import Settings
from app.db import SessionFactory
from app.decision.vocabulary import Question
from app.kit.attribution import read_lines
from app.memory.jobs import remember_after_reply
from app.nightly.run import nightly_step, start_nightly_run
from app.structured.consolidation import consolidate_channel
from app.turn.store import PostedReply
from tests.support.memory_env import BOT_ID, MemoryEnv, all_memories, memory_env
from tests.support.obs_env import T0, fact_json, is_episode_call, responder, say, writer_speaker

CHANNEL = 500
ALICE, BOB = 11, 22
GOSSIP = "Alice really likes sushi, she told me"


@pytest.fixture
async def env(settings: Settings, sessions: SessionFactory) -> AsyncIterator[MemoryEnv]:
    async with memory_env(settings, sessions) as world:
        world.jev.answers[Question.WORTH_KEEPING] = 0.9
        world.jev.answers[Question.ADD_MEMORY] = 0.9
        world.model.responder = responder("Bob talked about Alice and sushi.", about_alice)
        yield world


def about_alice(body: dict[str, Any]) -> str:
    """A writer that only ever finds the fact about Alice, labelled as what it is."""
    if writer_speaker(body) == "Alice":
        return fact_json("", subject="none")
    return fact_json("Alice likes sushi.", subject="other")


async def conversation(sessions: SessionFactory, *, alice_present: bool) -> None:
    """Bob gossips about Alice; Alice may be in the channel saying something unrelated."""
    if alice_present:
        await say(
            sessions,
            id=1,
            channel_id=CHANNEL,
            author_id=ALICE,
            author_name="Alice",
            content="evening all",
        )
    await say(sessions, id=2, channel_id=CHANNEL, author_id=BOB, author_name="Bob", content=GOSSIP)
    await say(
        sessions,
        id=3,
        channel_id=CHANNEL,
        author_id=BOB,
        author_name="Bob",
        content=f"<@{BOT_ID}> what should I cook for her?",
    )
    await say(
        sessions,
        id=4,
        channel_id=CHANNEL,
        author_id=BOT_ID,
        author_name="companion",
        content="Maybe hand rolls?",
        is_bot=True,
    )


def alices_writer_calls(env: MemoryEnv) -> list[dict[str, Any]]:
    return [
        b for b in env.model.requests if not is_episode_call(b) and writer_speaker(b) == "Alice"
    ]


both = pytest.mark.parametrize("alice_present", [False, True], ids=["absent", "present"])


@both
async def test_mem03_per_reply_path_never_stores_bobs_gossip(
    env: MemoryEnv, alice_present: bool
) -> None:
    await conversation(env.sessions, alice_present=alice_present)

    outcome = await remember_after_reply(env.services, PostedReply(3, CHANNEL, BOB, 4))

    assert outcome.discarded == ["Alice likes sushi."]
    assert await all_memories(env.sessions) == []  # not Alice's, and not Bob's either


@both
async def test_mem03_nightly_path_never_stores_bobs_gossip(
    env: MemoryEnv, alice_present: bool
) -> None:
    await conversation(env.sessions, alice_present=alice_present)
    started = await start_nightly_run(env.sessions, env.services.queue, now=T0 + timedelta(hours=1))
    step: str | None = "plan"
    while step is not None and step.split(":")[0] in ("plan", "extract"):
        step = await nightly_step(env.services, started.run_id, step)

    assert await all_memories(env.sessions) == []
    assert any(writer_speaker(b) == "Bob" for b in env.model.requests)  # Bob was processed
    for body in alices_writer_calls(env):  # Alice's chunk never carries Bob's words
        assert "sushi" not in str(body["messages"])


@both
async def test_mem03_consolidation_never_stores_bobs_gossip(
    env: MemoryEnv, alice_present: bool, caplog: pytest.LogCaptureFixture
) -> None:
    await conversation(env.sessions, alice_present=alice_present)

    with caplog.at_level(logging.INFO, logger="app.memory.write_path"):
        outcome = await consolidate_channel(env.services, CHANNEL)

    assert outcome.status == "done"
    assert outcome.authors == ([BOB, ALICE] if alice_present else [BOB])
    assert outcome.discarded == 1
    assert await all_memories(env.sessions) == []
    third_party = [
        r.speaker_id  # type: ignore[attr-defined]
        for r in caplog.records
        if r.getMessage() == "memory text discarded" and r.subject == "other"  # type: ignore[attr-defined]
    ]
    assert third_party == [BOB]  # discarded, and logged against the speaker whose run it was
    # Alice's exchange holds only Alice's own lines: Bob's words never reach her writer or Jev.
    for body in alices_writer_calls(env):
        assert "sushi" not in str(body["messages"])
    for asked in env.jev.requests:
        lines = read_lines(asked["prompt"])
        if {"Alice"} == {line["from"] for line in lines if line.get("speaker")}:
            assert "sushi" not in asked["prompt"]
    assert len(alices_writer_calls(env)) == (1 if alice_present else 0)


async def test_mem03_consolidation_exchanges_only_ever_name_an_author_as_speaker(
    env: MemoryEnv,
) -> None:
    """Even a writer that mislabels the fact can only reach the profile of someone who wrote:
    the speaker of every exchange is an author of the batch, and its lines are theirs."""
    await conversation(env.sessions, alice_present=False)
    env.model.responder = responder(
        "summary", lambda body: fact_json("Alice likes sushi.", subject="speaker")
    )

    await consolidate_channel(env.services, CHANNEL)

    owners = {m.user_id for m in await all_memories(env.sessions)}
    assert ALICE not in owners
    assert owners <= {BOB}
    lines = [line for asked in env.jev.requests for line in read_lines(asked["prompt"])]
    speakers = {line["from"] for line in lines if line.get("speaker")}
    others = [line for line in lines if not line.get("speaker")]
    assert speakers == {"Bob"}
    assert others == []
