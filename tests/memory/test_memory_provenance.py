"""A memory's sources are the messages its fact came from: the writer names the exchange's
lines it used, checked against the exchange; none named, the message that was answered.
Driven through the webhook and the worker, with the demo brain as both models."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any, cast

import pytest

from app.channel.exchange import Exchange, Line
from app.chat.fake import Text
from app.config import Settings
from app.db import SessionFactory
from app.dev import brain
from app.dev.models import RULES
from app.memory.store import sources_of
from tests.support.memory_env import memories_of
from tests.support.trust_env import ALICE, BOB, World, trust_world


def _demo_brain(body: dict[str, Any]) -> Text:
    system = [block["text"] for block in body.get("system") or []]
    return Text(brain.chat_text(system, list(body["messages"])))


@pytest.fixture
async def world(
    settings: Settings, sessions: SessionFactory, redis: object, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[World]:
    async with trust_world(settings, monkeypatch) as running:
        running.stack.model.responder = _demo_brain
        for question, rule in RULES.items():
            running.stack.jev.answers[cast(Any, question)] = rule
        yield running


async def _sources(sessions: SessionFactory, memory_id: int) -> list[int]:
    async with sessions() as session:
        found = await sources_of(session, [memory_id])
    return [s.message_id for s in found.get(memory_id, [])]


async def test_a_memory_links_only_the_message_its_fact_came_from(
    world: World, sessions: SessionFactory
) -> None:
    await world.tell(ALICE, "I love green tea")
    await world.tell(ALICE, "what do you remember about me?")
    matcha = await world.tell(ALICE, "抹茶が好き")

    memories = await memories_of(sessions, ALICE)
    [(matcha_id, _)] = [(i, text) for i, text in memories.items() if "抹茶" in text]
    assert await _sources(sessions, matcha_id) == [int(matcha["d"]["id"])]

    await world.tell(ALICE, f"!memory why {matcha_id}", mention=False)
    links = [line for line in world.dm_text(ALICE).splitlines() if line.startswith("- https")]
    assert links == [f"- https://discord.com/channels/500/300/{matcha['d']['id']}"]


async def test_a_compound_statement_gives_a_memory_per_fact_each_from_its_message(
    world: World, sessions: SessionFactory
) -> None:
    said = await world.tell(ALICE, "I love green tea and my cat is called Miso")

    memories = sorted((await memories_of(sessions, ALICE)).items())
    assert [text for _, text in memories] == [
        "Alice loves green tea.",
        "Alice's cat is called Miso.",
    ]
    for memory_id, _ in memories:
        assert await _sources(sessions, memory_id) == [int(said["d"]["id"])]
    assert "Alice loves green tea. Alice's cat is called Miso." in world.channel_texts(300)[-1]


def _exchange(trigger_id: int | None) -> Exchange:
    lines = (
        Line(ALICE, "Alice", False, "I love green tea", 11, 300),
        Line(BOB, "Bob", False, "me too", 12, 300),
        Line(ALICE, "Alice", False, "and I have a cat", 13, 300),
        Line(1000, "bot", True, "Nice!", 14, 300),
    )
    return Exchange(ALICE, "Alice", lines, trigger_id=trigger_id)


def test_named_lines_count_only_when_they_are_the_speakers_own_messages() -> None:
    exchange = _exchange(trigger_id=13)

    assert exchange.learned_from([1]) == [(11, 300)]
    assert exchange.learned_from([3, 1, 3]) == [(13, 300), (11, 300)]
    assert exchange.learned_from([2, 4, 9, -1]) == [(13, 300)]  # Bob's, the bot's, none: trigger


def test_without_a_named_line_or_trigger_the_speakers_newest_message_is_the_source() -> None:
    assert _exchange(trigger_id=None).learned_from([]) == [(13, 300)]
    assert _exchange(trigger_id=12).learned_from([]) == [(13, 300)]  # not the speaker's own
