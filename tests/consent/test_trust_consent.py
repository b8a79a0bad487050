"""Consent to be remembered, through the real webhook and worker: while a person is paused,
no learning path asks about them or writes about them — not the reply's write path, not the
channel consolidation, not the nightly run — and replies still use what is remembered.
`!forgetme` leaves them paused. MEMORY_LEARN_FROM narrows whom the background learns about."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import timedelta

import pytest
from sqlalchemy import select

from app.config import LearnFrom, Settings
from app.db import SessionFactory
from app.decision.vocabulary import Question
from app.kit.clock import utcnow
from app.models.memory import Memory
from tests.support.memory_env import add_message
from tests.support.stack import BOT_ID
from tests.support.trust_env import ALICE, BOB, CAROL, CHANNEL_A, World, tonight, trust_world

EVERY = 4  # MEMORY_CONSOLIDATE_EVERY for these tests


@pytest.fixture
async def world(
    settings: Settings, sessions: SessionFactory, redis: object, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[World]:
    async with trust_world(settings, monkeypatch, memory_consolidate_every=EVERY) as w:
        yield w


async def contents(sessions: SessionFactory, user_id: int) -> list[str]:
    async with sessions() as session:
        rows = await session.scalars(select(Memory.content).where(Memory.user_id == user_id))
        return sorted(rows)


def asked_about(world: World, marker: str) -> list[dict[str, object]]:
    """worth_keeping questions whose text holds ``marker``."""
    return [b for b in world.stack.jev.asked(Question.WORTH_KEEPING) if marker in str(b)]


def model_saw(world: World, marker: str) -> bool:
    return any(marker in str(body) for body in world.stack.model.requests)


async def test_pause_stops_the_reply_path_but_replies_still_remember(
    world: World, sessions: SessionFactory
) -> None:
    await world.tell(ALICE, "I keep bees on the roof")
    await world.tell(ALICE, "!memory pause", mention=False)
    assert "Paused" in world.channel_texts(CHANNEL_A)[-1]

    await world.tell(ALICE, "I also started a pottery class")

    assert asked_about(world, "pottery") == []
    assert await contents(sessions, ALICE) == ["Fact: <@1000> I keep bees on the roof"]
    assert "I keep bees on the roof" in world.last_reply_prompt()  # still used
    assert world.channel_texts(CHANNEL_A)[-1] == "Noted, thank you!"

    await world.tell(ALICE, "!memory show", mention=False)
    assert "Learning about you is paused" in world.dm_text(ALICE)

    await world.tell(ALICE, "!memory resume", mention=False)
    await world.tell(ALICE, "I also started a pottery class")
    assert "Fact: <@1000> I also started a pottery class" in await contents(sessions, ALICE)


async def test_pause_stops_channel_consolidation_from_learning_about_her(
    world: World, sessions: SessionFactory
) -> None:
    await world.tell(ALICE, "!memory pause", mention=False)

    for n in range(EVERY):  # unaddressed chatter; enough to trigger a consolidation
        await world.tell(ALICE, f"secret hobby {n}: falconry", mention=False)
        await world.tell(BOB, f"bob hobby {n}: chess", mention=False)
        await world.tell(CAROL, f"carol hobby {n}: go", mention=False)  # one alone never does

    assert asked_about(world, "falconry") == []
    assert not model_saw(world, "falconry")  # not even in the episode's input
    assert model_saw(world, "chess")  # the consolidation did run, for Bob
    assert await contents(sessions, ALICE) == []


async def test_pause_stops_the_nightly_run_from_learning_about_her(
    world: World, sessions: SessionFactory
) -> None:
    now = utcnow()
    await world.tell(ALICE, "!memory pause", mention=False)
    for n, (who, name, said) in enumerate(
        [(ALICE, "alice", "I started falconry"), (BOB, "bob", "I started chess")] * 2
    ):
        await add_message(
            sessions,
            id=7000 + n,
            channel_id=CHANNEL_A,
            author_id=who,
            author_name=name,
            content=said,
            at=now - timedelta(hours=3, minutes=-n),
        )

    await tonight(world)

    assert asked_about(world, "falconry") == []
    assert asked_about(world, "chess")
    assert await contents(sessions, ALICE) == []
    assert await contents(sessions, BOB) == ["Fact: I started chess"]


async def test_forgetme_leaves_her_paused_and_says_how_to_resume(
    world: World, sessions: SessionFactory
) -> None:
    await world.tell(ALICE, "I keep bees on the roof")

    await world.tell(ALICE, "!forgetme", mention=False)
    assert "erasing" in world.channel_texts(CHANNEL_A)[-1]  # at once, in the channel
    receipt = world.dm_text(ALICE)  # then the receipt, by DM
    assert "`!memory resume`" in receipt

    await world.tell(ALICE, "I adopted a greyhound")
    assert asked_about(world, "greyhound") == []
    assert await contents(sessions, ALICE) == []


async def test_learning_only_from_people_who_addressed_the_bot_lately(
    settings: Settings, sessions: SessionFactory, redis: object, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with trust_world(
        settings, monkeypatch, memory_learn_from=LearnFrom.ADDRESSED, memory_learn_addressed_days=7
    ) as world:
        now = utcnow()
        await add_message(
            sessions,
            id=8000,
            channel_id=CHANNEL_A,
            author_id=BOB,
            author_name="bob",
            content=f"<@{BOT_ID}> hi there",
            at=now - timedelta(days=2),
        )
        for n, (who, name) in enumerate([(ALICE, "alice"), (BOB, "bob")]):
            await add_message(
                sessions,
                id=8100 + n,
                channel_id=CHANNEL_A,
                author_id=who,
                author_name=name,
                content=f"{name} started woodworking",
                at=now - timedelta(hours=2),
            )

        await tonight(world)

        assert asked_about(world, "bob started woodworking")
        assert asked_about(world, "alice started woodworking") == []
