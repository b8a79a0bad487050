"""MEM-10 on real Postgres: with MEMORY_ENABLED=false no observation is written, nothing is
enqueued, consolidation returns at once without a model or decision call, and the prompt's
memory part is empty without reading anyone's memories."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import func, select

from app.channel.exchange import Place
from app.config import Settings
from app.consent.service import Learning
from app.db import SessionFactory, unit_of_work
from app.frames.events import (
    EventType,
    MessageUpdate,
    ReactionAdd,
    ReactionRemoveAll,
)
from app.memory.recall import PromptMemory, prompt_memory
from app.models.memory import MemoryLog
from app.models.structured import Observation
from app.observations.service import (
    observe_bot_message,
    observe_deletes,
    observe_edit,
    observe_message,
    observe_reaction,
)
from app.structured.consolidation import consolidate_channel, enqueue_if_due
from tests.support.frames import (
    message_create,
    message_update,
    parsed_message,
    reaction_add,
    reaction_remove_all,
)
from tests.support.memory_env import BOT_ID, add_memory, memory_env
from tests.support.obs_env import episodes_of, say

CHANNEL = 500
ALICE = 11
T0 = datetime(2026, 11, 1, 12, 0, tzinfo=UTC)


def off(settings: Settings) -> Settings:
    return settings.model_copy(update={"memory_enabled": False})


async def count(sessions: SessionFactory, table: type[Observation] | type[MemoryLog]) -> int:
    async with sessions() as session:
        return int(await session.scalar(select(func.count()).select_from(table)) or 0)


async def test_mem10_no_observation_is_written(
    settings: Settings, sessions: SessionFactory
) -> None:
    learning = Learning.of(off(settings))
    where: dict[str, Any] = {"channel_id": CHANNEL, "guild_id": None}
    said = message_create(content="hello", message_id=1, author_id=ALICE, timestamp=T0, **where)
    message = parsed_message(said)
    edit = MessageUpdate.model_validate(message_update(message_id=1, content="hi", **where)["d"])
    reaction = ReactionAdd.model_validate(reaction_add(message_id=1, user_id=22, **where)["d"])
    clear = ReactionRemoveAll.model_validate(reaction_remove_all(message_id=1, **where)["d"])

    async with unit_of_work(sessions) as session:
        results = [
            await observe_message(session, message, "1", learning),
            await observe_bot_message(
                session,
                message_id=2,
                channel_id=CHANNEL,
                guild_id=None,
                bot_user_id=BOT_ID,
                content="hey",
                event_id="bot:2",
                learning=learning,
            ),
            await observe_edit(session, edit, "update:1:x", learning),
            await observe_deletes(session, CHANNEL, None, [1], "delete:1", learning),
            await observe_reaction(
                session, EventType.MESSAGE_REACTION_ADD, reaction, "r:1", learning
            ),
            await observe_reaction(
                session, EventType.MESSAGE_REACTION_REMOVE_ALL, clear, "rc:1", learning
            ),
        ]

    assert learning.enabled is False
    assert not any(results)
    assert await count(sessions, Observation) == 0


async def test_mem10_consolidation_does_not_run(
    settings: Settings, sessions: SessionFactory
) -> None:
    async with memory_env(
        settings.model_copy(update={"memory_consolidate_every": 1}), sessions
    ) as env:
        await say(
            sessions, id=1, channel_id=CHANNEL, author_id=ALICE, author_name="Alice", content="x"
        )  # recorded while memory was on
        switched_off = replace(env.services, settings=off(env.services.settings))

        enqueued = await enqueue_if_due(switched_off, CHANNEL)
        outcome = await consolidate_channel(switched_off, CHANNEL)

        assert enqueued is False
        assert env.queue.jobs == []
        assert outcome.status == "memory_off"
        assert env.model.requests == [] and env.jev.requests == []
        assert await episodes_of(sessions, CHANNEL) == []
        assert await count(sessions, MemoryLog) == 0


async def test_mem10_prompt_memory_reads_nothing(
    settings: Settings, sessions: SessionFactory
) -> None:
    await add_memory(sessions, ALICE, "Alice plays the cello.")

    async with unit_of_work(sessions) as session:
        memory = await prompt_memory(
            session,
            off(settings),
            channel_id=CHANNEL,
            place=Place(1),
            speaker_id=ALICE,
            names={ALICE: "Alice"},
            participant_ids=[],
        )

    assert memory == PromptMemory(None, None)
    assert await count(sessions, MemoryLog) == 0
