"""`!memory search <words>` (and `@bot memory search …`) through the real webhook and worker:
the asker's own matching memories by DM, best first, each with id, where and 80 characters;
no model or decision call; one logged read with actor `command`."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from sqlalchemy import select

from app.commands.memory import NOTHING_TO_SEARCH, SEARCH_SENT
from app.commands.parser import MEMORY_USAGE, MemorySearch, Usage, parse_command
from app.commands.render import search_results
from app.config import Settings
from app.db import SessionFactory
from app.memory.records import MemoryRecord
from app.models.memory import MemoryLog
from tests.support.memory_env import add_memory, read_ids
from tests.support.stack import BOT_ID
from tests.support.trust_env import ALICE, BOB, CHANNEL_A, World, trust_world

LONG = "Alice's cat Miso " + "likes to sit in cardboard boxes, " * 4 + "and sleeps a lot."


@pytest.fixture
async def world(
    settings: Settings, sessions: SessionFactory, redis: object, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[World]:
    async with trust_world(settings, monkeypatch) as w:
        yield w


def test_search_takes_the_rest_of_the_line_as_written() -> None:
    assert parse_command("!memory search  Green TEA  ", BOT_ID) == MemorySearch("Green TEA")
    assert parse_command("!memory SEARCH 猫の名前", BOT_ID) == MemorySearch("猫の名前")
    assert parse_command(f"<@{BOT_ID}> memory search miso", BOT_ID) == MemorySearch("miso")
    assert parse_command("!memory search", BOT_ID) == Usage(MEMORY_USAGE)
    assert "`!memory search <words>`" in MEMORY_USAGE


def test_the_listing_says_when_nothing_matches() -> None:
    assert search_results([], words="sumo", here=None) == "None of your memories match “sumo”."
    listing = search_results([MemoryRecord(3, ALICE, "likes tea")], words="tea", here=None)
    assert "`3` · added by hand · likes tea" in listing


async def reads(sessions: SessionFactory) -> list[tuple[str, int, list[int]]]:
    """Every ledger row (all of them reads here): who read whose memories, and which."""
    async with sessions() as session:
        rows = await session.scalars(select(MemoryLog).order_by(MemoryLog.id))
        return [(r.actor, r.user_id, read_ids(r)) for r in rows]


async def test_both_forms_dm_the_matches_best_first_and_log_one_read_each(
    world: World, sessions: SessionFactory
) -> None:
    cat = await add_memory(sessions, ALICE, LONG, age_days=30)
    tea = await add_memory(sessions, ALICE, "Alice drinks green tea.", age_days=2)
    await add_memory(sessions, ALICE, "Alice plays the cello.", age_days=1)
    await add_memory(sessions, BOB, "Bob's cat is also called Miso.")
    japanese = await add_memory(sessions, ALICE, "アリスの猫はミソという名前", age_days=40)

    await world.tell(ALICE, "!memory search cat Miso", mention=False)
    await world.tell(ALICE, "memory search 猫")

    first, second = world.stack.discord.dms_to(ALICE)
    assert f"`{cat}` · added by hand · {LONG[:80]}…" in first["content"]
    assert "tea" not in first["content"] and "cello" not in first["content"]
    assert "Bob" not in first["content"]
    assert f"`{japanese}`" in second["content"] and f"`{cat}`" not in second["content"]
    assert world.channel_texts(CHANNEL_A) == [SEARCH_SENT, SEARCH_SENT]
    assert await reads(sessions) == [
        ("command", ALICE, [cat]),
        ("command", ALICE, [japanese]),
    ]
    assert world.stack.model.requests == [] and world.stack.jev.requests == []
    assert tea  # in the profile, not in the answers


async def test_in_a_dm_and_with_nothing_to_search_for(
    world: World, sessions: SessionFactory
) -> None:
    tea = await add_memory(sessions, ALICE, "Alice drinks green tea.")

    await world.tell(ALICE, "!memory search tea", guild=None)
    await world.tell(ALICE, "!memory search 🎉 !!", mention=False)

    dms = [m["content"] for m in world.stack.discord.dms_to(ALICE)]
    assert any("Alice drinks green tea." in text for text in dms)
    assert NOTHING_TO_SEARCH in world.channel_texts(CHANNEL_A)
    assert await reads(sessions) == [("command", ALICE, [tea])]  # the empty one read nothing
