"""remember_after_reply: the exchange comes from the channel log (six live messages up to the
bot's reply, edits applied, deletes skipped), the trigger makes it idempotent, MEM-10 stops it."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from app.chat.fake import Text
from app.config import Settings
from app.db import SessionFactory
from app.decision.vocabulary import Question
from app.kit.attribution import read_lines
from app.memory.jobs import remember_after_reply
from app.turn.store import PostedReply
from tests.support.memory_env import (
    BOT_ID,
    MemoryEnv,
    add_message,
    all_memories,
    fact,
    ledger_rows,
    memory_env,
    writer_request_text,
)

CHANNEL, OTHER_CHANNEL = 500, 501
ALICE, BOB = 11, 22
OLDEST = "oldest line, out of the window"
T0 = datetime(2026, 11, 1, 12, 0, tzinfo=UTC)


@pytest.fixture
async def env(settings: Settings, sessions: SessionFactory) -> AsyncIterator[MemoryEnv]:
    async with memory_env(settings, sessions) as world:
        yield world


async def channel_log(sessions: SessionFactory) -> None:
    """Messages 1..9 in order; 4 is deleted, 9 comes after the reply (8)."""
    script = [
        (1, ALICE, "Alice", OLDEST),
        (2, BOB, "Bob", "morning all"),
        (3, ALICE, "Alice", "I adopted a dog named Pochi"),
        (4, BOB, "Bob", "this was deleted"),
        (5, BOB, "Bob", "cute!"),
        (6, ALICE, "Alice", "she is a shiba"),
        (7, ALICE, "Alice", "@companion what should I feed her?"),
        (8, BOT_ID, "companion", "Good quality kibble!"),
        (9, BOB, "Bob", "after the reply"),
    ]
    for n, author, name, content in script:
        await add_message(
            sessions,
            id=n,
            channel_id=CHANNEL,
            author_id=author,
            author_name=name,
            content=content,
            at=T0 + timedelta(seconds=n),
            is_bot=author == BOT_ID,
            deleted=n == 4,
        )
    await add_message(
        sessions,
        id=100,
        channel_id=OTHER_CHANNEL,
        author_id=ALICE,
        author_name="Alice",
        content="another channel",
        at=T0 + timedelta(seconds=7),
    )


async def test_the_exchange_is_six_live_messages_up_to_the_reply(env: MemoryEnv) -> None:
    await channel_log(env.sessions)
    env.jev.answers[Question.WORTH_KEEPING] = 0.9
    env.model.default = Text(fact("Alice has a shiba named Pochi."))

    outcome = await remember_after_reply(env.services, PostedReply(7, CHANNEL, ALICE, 8))

    [asked] = env.jev.asked(Question.WORTH_KEEPING)
    assert read_lines(asked["prompt"]) == [
        {"from": "Bob", "text": "morning all"},
        {"from": "Alice", "speaker": True, "text": "I adopted a dog named Pochi"},
        {"from": "Bob", "text": "cute!"},
        {"from": "Alice", "speaker": True, "text": "she is a shiba"},
        {"from": "Alice", "speaker": True, "text": "@companion what should I feed her?"},
        {"from": "companion", "bot": True, "text": "Good quality kibble!"},
    ]
    assert "Alice" in writer_request_text(env.model.requests[0])
    [memory] = await all_memories(env.sessions)
    assert (memory.user_id, outcome.added) == (ALICE, [memory.id])
    rows = await ledger_rows(env.sessions)
    assert {(r.actor, r.trigger) for r in rows} == {("extraction", "reply:7")}


async def test_a_trigger_pushed_out_of_the_window_still_takes_the_oldest_slot(
    env: MemoryEnv,
) -> None:
    await channel_log(env.sessions)
    env.jev.answers[Question.WORTH_KEEPING] = 0.0

    await remember_after_reply(env.services, PostedReply(1, CHANNEL, ALICE, 9))

    [asked] = env.jev.asked(Question.WORTH_KEEPING)
    rendered = read_lines(asked["prompt"])
    assert len(rendered) == 6
    assert rendered[0] == {"from": "Alice", "speaker": True, "text": OLDEST}
    assert rendered[-1] == {"from": "Bob", "text": "after the reply"}


async def test_running_the_job_twice_changes_memories_once(env: MemoryEnv) -> None:
    await channel_log(env.sessions)
    env.jev.answers[Question.WORTH_KEEPING] = 0.9
    env.model.default = Text(fact("Alice has a shiba named Pochi."))
    reply = PostedReply(7, CHANNEL, ALICE, 8)

    await remember_after_reply(env.services, reply)
    again = await remember_after_reply(env.services, reply)

    assert again.stopped == "already_applied"
    assert len(await all_memories(env.sessions)) == 1


async def test_memory_switched_off_does_nothing(env: MemoryEnv) -> None:
    await channel_log(env.sessions)
    env.jev.answers[Question.WORTH_KEEPING] = 0.9
    off = replace(
        env.services, settings=env.services.settings.model_copy(update={"memory_enabled": False})
    )

    outcome = await remember_after_reply(off, PostedReply(7, CHANNEL, ALICE, 8))

    assert outcome.stopped == "memory_off"
    assert env.jev.requests == []
    assert await ledger_rows(env.sessions) == []


async def test_unknown_messages_make_no_exchange(env: MemoryEnv) -> None:
    outcome = await remember_after_reply(env.services, PostedReply(7, CHANNEL, ALICE, None))

    assert outcome.stopped == "unusable"
    assert env.jev.requests == []
