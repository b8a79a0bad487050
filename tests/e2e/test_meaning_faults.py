"""Embeddings beside the words when the embeddings service misbehaves, through the real
webhook, worker and Postgres with a fake on the real wire format: down, slow or answering
garbage, the turn still answers and recalls by words (counted); a retried turn does not embed
its query again; an edited message is embedded anew and a deleted one loses its vector."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from prometheus_client import REGISTRY
from sqlalchemy import select

from app.config import MemoryRecall
from app.db import SessionFactory
from app.embeddings.fake import FakeEmbeddings
from app.frames.events import MessageCreate
from app.kit.clock import utcnow
from app.models.messages import Message
from app.turn.attempt import Attempt
from app.turn.pipeline import run_turn
from app.wiring import open_services
from tests.support.embeddings import backfill_now, fake_settings
from tests.support.frames import message_delete, message_update
from tests.support.memory_env import add_memory
from tests.support.queue import InMemoryQueue
from tests.support.trust_env import ALICE, CHANNEL_A, GUILD_A, World, WorldWith

# The turn's wait for its query's vector: long enough that a loaded machine never makes a
# working service look slow; the slow service answers well after it.
QUERY_TIMEOUT_S = 1.0


@pytest.fixture
async def world(
    world_with: WorldWith, fake_embeddings: tuple[FakeEmbeddings, str]
) -> AsyncIterator[World]:
    async with world_with(
        memory_recall=MemoryRecall.RELEVANT,
        embeddings_query_timeout_s=QUERY_TIMEOUT_S,
        **fake_settings(*fake_embeddings),
    ) as w:
        yield w


def queries_that(outcome: str) -> float:
    return REGISTRY.get_sample_value("recall_query_vectors_total", {"outcome": outcome}) or 0.0


@pytest.mark.parametrize(
    ("trouble", "outcome"),
    [
        ({"down": True}, "status"),
        ({"latency": QUERY_TIMEOUT_S + 2.0}, "timeout"),
        ({"garbage": True}, "malformed"),
    ],
)
async def test_with_the_service_down_slow_or_garbled_the_turn_answers_by_words(
    world: World,
    sessions: SessionFactory,
    fake_embeddings: tuple[FakeEmbeddings, str],
    trouble: dict[str, Any],
    outcome: str,
) -> None:
    await add_memory(sessions, ALICE, "Alice has a cat named Miso", age_days=30)
    for name, value in trouble.items():
        setattr(fake_embeddings[0], name, value)
    before = queries_that(outcome)

    await world.tell(ALICE, "how is Miso?")

    assert "Alice has a cat named Miso" in world.last_reply_prompt()  # found by its words
    assert world.stack.discord.messages_in(CHANNEL_A)  # answered
    assert queries_that(outcome) == before + 1


async def test_a_retried_turn_does_not_embed_its_query_again(
    world: World, fake_embeddings: tuple[FakeEmbeddings, str]
) -> None:
    frame = world.say(ALICE, "how is Miso?")
    await world.stack.deliver(frame)
    assert fake_embeddings[0].texts().count("how is Miso?") == 1
    message = MessageCreate.model_validate(frame["d"])

    # The job run once more (a worker died after the reply, say): nothing is embedded again.
    async with open_services(world.stack.settings, queue=InMemoryQueue()) as services:
        await run_turn(services, message, Attempt(frame["d"]["id"], utcnow()))

    assert fake_embeddings[0].texts().count("how is Miso?") == 1
    assert len(world.stack.discord.messages_in(CHANNEL_A)) == 1  # and nothing posted twice


async def test_an_edit_is_embedded_anew_and_a_delete_drops_the_vector(
    world: World, sessions: SessionFactory, fake_embeddings: tuple[FakeEmbeddings, str]
) -> None:
    first = world.say(ALICE, "my sourdough starter is called Bubbles", mention=False)
    second = world.say(ALICE, "the bakery on the corner closed", mention=False)
    await world.stack.deliver(first, second)
    await backfill_now(world.stack.settings)
    await world.stack.deliver(
        message_update(
            message_id=int(first["d"]["id"]),
            channel_id=CHANNEL_A,
            guild_id=GUILD_A,
            content="my sourdough starter is called Doughbert",
        ),
        message_delete(message_id=int(second["d"]["id"]), channel_id=CHANNEL_A, guild_id=GUILD_A),
    )
    async with sessions() as session:
        edited = await session.get(Message, int(first["d"]["id"]))
        assert edited is not None and edited.embedding_space is None  # the old text's is gone
    await backfill_now(world.stack.settings)

    ids = [int(first["d"]["id"]), int(second["d"]["id"])]
    async with sessions() as session:
        found = await session.execute(
            select(Message.id, Message.embedding_space).where(Message.id.in_(ids))
        )
        rows = dict(found.tuples().all())
    assert rows[int(first["d"]["id"])] is not None  # embedded anew
    assert rows[int(second["d"]["id"])] is None  # deleted: no vector, and none made again
    assert "my sourdough starter is called Doughbert" in fake_embeddings[0].texts()
