"""Where a memory may surface, through the real webhook, worker and database: what a person
says in a DM never reaches a guild prompt (under both recall scopes), what they say in one
guild never reaches another, and in their own DM everything of theirs may."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from sqlalchemy import select

from app.config import RecallScope, Settings
from app.db import SessionFactory
from app.models.memory import Memory, MemorySource
from tests.support.trust_env import (
    ALICE,
    BOB,
    CHANNEL_A,
    GUILD_A,
    GUILD_B,
    World,
    trust_world,
)

DM_SECRET = "my biopsy result came back benign"
GUILD_A_FACT = "I run the Tuesday book club"
GUILD_B_FACT = "I moderate the retro gaming server"


@pytest.fixture(params=[RecallScope.SPEAKER, RecallScope.PARTICIPANTS])
async def world(
    request: pytest.FixtureRequest,
    settings: Settings,
    sessions: SessionFactory,
    redis: object,
    monkeypatch: pytest.MonkeyPatch,
) -> AsyncIterator[World]:
    async with trust_world(settings, monkeypatch, memory_recall_scope=request.param) as w:
        yield w


async def origins(sessions: SessionFactory) -> dict[str, tuple[str, int | None]]:
    async with sessions() as session:
        rows = await session.scalars(select(Memory))
        return {m.content: (m.origin, m.origin_guild_id) for m in rows}


async def test_a_fact_told_in_a_dm_never_reaches_a_guild_prompt(
    world: World, sessions: SessionFactory
) -> None:
    await world.tell(ALICE, DM_SECRET, guild=None)
    await world.tell(ALICE, GUILD_A_FACT)
    assert await origins(sessions) == {
        f"Fact: {DM_SECRET}": ("dm", None),
        f"Fact: <@1000> {GUILD_A_FACT}": ("guild", GUILD_A),
    }

    await world.tell(ALICE, "how are you?")  # Alice in the guild
    await world.tell(BOB, "what is new?")  # Bob in the guild, Alice a participant

    alice_prompt, bob_prompt = world.reply_prompts()[-2:]
    assert GUILD_A_FACT in alice_prompt and DM_SECRET not in alice_prompt
    assert DM_SECRET not in bob_prompt
    if world.stack.settings.memory_recall_scope is RecallScope.PARTICIPANTS:
        assert GUILD_A_FACT in bob_prompt  # participants' guild facts do reach it


async def test_in_her_own_dm_every_memory_of_hers_may_surface_and_nobody_elses(
    world: World,
) -> None:
    await world.tell(ALICE, DM_SECRET, guild=None)
    await world.tell(ALICE, GUILD_A_FACT)
    await world.tell(BOB, GUILD_B_FACT, guild=GUILD_B, channel=CHANNEL_A + 50)

    await world.tell(ALICE, "what do you remember?", guild=None)

    prompt = world.last_reply_prompt()
    assert DM_SECRET in prompt and GUILD_A_FACT in prompt
    assert GUILD_B_FACT not in prompt


async def test_a_fact_learned_in_guild_a_never_reaches_guild_b(world: World) -> None:
    await world.tell(ALICE, GUILD_A_FACT)

    await world.tell(ALICE, "hello over here", guild=GUILD_B, channel=CHANNEL_A + 50)
    assert GUILD_A_FACT not in world.last_reply_prompt()

    await world.tell(ALICE, "hello again", guild=GUILD_A)
    assert GUILD_A_FACT in world.last_reply_prompt()


async def test_an_update_from_another_place_narrows_the_origin(
    world: World, sessions: SessionFactory
) -> None:
    await world.tell(ALICE, GUILD_A_FACT)
    world.stack.jev.answers["memory_verdict"] = "update"  # type: ignore[index]
    world.stack.jev.answers["add_memory"] = 0.0  # type: ignore[index]

    # Told again in her DM: the DM may read and rewrite it, and the rewrite now holds what
    # she said privately, so it may no longer surface in guild A.
    await world.tell(ALICE, "I stopped running the book club", guild=None)

    assert await origins(sessions) == {"Fact: I stopped running the book club": ("dm", None)}
    await world.tell(ALICE, "hi", guild=GUILD_A)
    assert "stopped running" not in world.last_reply_prompt()


async def test_each_memory_links_the_messages_it_was_learned_from(
    world: World, sessions: SessionFactory
) -> None:
    told = await world.tell(ALICE, GUILD_A_FACT)

    async with sessions() as session:
        [source] = list(await session.scalars(select(MemorySource)))
    assert (source.message_id, source.channel_id, source.guild_id) == (
        int(told["d"]["id"]),
        CHANNEL_A,
        GUILD_A,
    )
    assert source.trigger == f"reply:{told['d']['id']}"


async def test_staff_of_one_guild_see_and_forget_only_what_was_learned_there(
    world: World, sessions: SessionFactory
) -> None:
    await world.tell(ALICE, DM_SECRET, guild=None)
    await world.tell(ALICE, GUILD_A_FACT)
    staff = world.stack.settings.model_copy(update={"staff_user_ids": [BOB]})
    world.stack.settings = staff  # staff are checked by the worker, which reads these
    dm_memory = next(
        memory_id for text, memory_id in (await ids_by_text(sessions)).items() if "biopsy" in text
    )

    await world.tell(BOB, f"!bot memory {ALICE}", mention=False)
    await world.tell(BOB, f"!bot forget-fact {dm_memory}", mention=False)

    listing = world.dm_text(BOB)
    assert GUILD_A_FACT in listing and DM_SECRET not in listing
    assert "No memory with id" in world.channel_texts(CHANNEL_A)[-1]
    assert dm_memory in (await ids_by_text(sessions)).values()


async def ids_by_text(sessions: SessionFactory) -> dict[str, int]:
    async with sessions() as session:
        return {m.content: m.id for m in await session.scalars(select(Memory))}
