"""A person sees everything kept about them, through the real webhook and worker with the
Discord fake recording DMs and attachments: show (where, how many more), show all, why (with
jump links), export (a JSON file), and a closed DM that leaks nothing."""

from __future__ import annotations

import json

from sqlalchemy import select

from app.db import SessionFactory
from app.models.memory import Memory, MemoryLog
from app.vocabulary import Actor
from tests.support.memory_env import add_memory, read_ids
from tests.support.stack import BOT_ID
from tests.support.trust_env import (
    ALICE,
    BOB,
    CHANNEL_A,
    DM_CHANNELS,
    GUILD_A,
    World,
)


async def memory_ids(sessions: SessionFactory, user_id: int) -> dict[str, int]:
    async with sessions() as session:
        rows = await session.scalars(select(Memory).where(Memory.user_id == user_id))
        return {m.content: m.id for m in rows}


async def command_reads(sessions: SessionFactory, user_id: int) -> list[list[int]]:
    """The memory ids each of the person's own commands read, in order."""
    async with sessions() as session:
        query = select(MemoryLog).where(
            MemoryLog.action == "read",
            MemoryLog.actor == Actor.COMMAND,
            MemoryLog.user_id == user_id,
        )
        return [read_ids(row) for row in await session.scalars(query.order_by(MemoryLog.id))]


async def reads_of(sessions: SessionFactory, user_id: int) -> list[MemoryLog]:
    async with sessions() as session:
        query = select(MemoryLog).where(MemoryLog.action == "read", MemoryLog.user_id == user_id)
        return list(await session.scalars(query))


async def test_show_lists_the_ten_newest_with_where_and_how_many_more(
    world: World, sessions: SessionFactory
) -> None:
    for n in range(12):
        await add_memory(sessions, ALICE, f"note {n:02d}", age_days=20 - n)
    await world.tell(ALICE, "I keep bees on the roof")  # learned here, in guild A

    await world.tell(ALICE, "!memory show", mention=False)

    dm = world.dm_text(ALICE)
    listed = [line for line in dm.splitlines() if line.startswith("`")]
    assert len(listed) == 10
    assert "· this server · Fact: <@1000> I keep bees on the roof" in listed[0]
    assert "…and 3 more: `!memory show all`" in dm
    assert "paused" not in dm


async def test_show_all_lists_every_memory_in_several_dms(
    world: World, sessions: SessionFactory
) -> None:
    for n in range(30):
        await add_memory(sessions, ALICE, f"note {n:02d} " + "x" * 150)

    await world.tell(ALICE, "!memory show all", mention=False)

    dms = world.stack.discord.dms_to(ALICE)
    assert len(dms) > 1 and not any(dm["attachments"] for dm in dms)
    listed = [line for line in world.dm_text(ALICE).splitlines() if line.startswith("`")]
    assert len(listed) == 30
    assert "more:" not in world.dm_text(ALICE)


async def test_show_all_goes_as_a_text_file_when_it_is_long(
    world: World, sessions: SessionFactory
) -> None:
    for n in range(80):
        await add_memory(sessions, ALICE, f"note {n:02d} " + "x" * 150)

    await world.tell(ALICE, "!memory show all", mention=False)

    [dm] = world.stack.discord.dms_to(ALICE)
    assert "All 80 of your memories are in the attached file." in dm["content"]
    listing = world.stack.discord.attachment(dm, f"memories-{ALICE}.txt").decode()
    assert sum(line.startswith("`") for line in listing.splitlines()) == 80


async def test_why_sends_when_and_where_with_jump_links_and_later_changes(
    world: World, sessions: SessionFactory
) -> None:
    told = await world.tell(ALICE, "I keep bees on the roof")
    [memory_id] = (await memory_ids(sessions, ALICE)).values()
    dm_told = await world.tell(ALICE, "I keep bees on the roof and the balcony", guild=None)
    assert len(await memory_ids(sessions, ALICE)) == 2

    await world.tell(ALICE, f"!memory why {memory_id}", mention=False)

    dm = world.dm_text(ALICE)
    guild_link = f"https://discord.com/channels/{GUILD_A}/{CHANNEL_A}/{told['d']['id']}"
    assert guild_link in dm
    assert "in this server" in dm
    assert "Learned " in dm and "UTC" in dm
    [added] = [m for m in (await memory_ids(sessions, ALICE)) if "balcony" in m]
    dm_memory = (await memory_ids(sessions, ALICE))[added]
    await world.tell(ALICE, f"!memory why {dm_memory}", guild=None)
    dm_link = f"https://discord.com/channels/@me/{DM_CHANNELS[ALICE]}/{dm_told['d']['id']}"
    assert dm_link in world.dm_text(ALICE)
    # Each lookup is a ledger read of that one memory.
    assert await command_reads(sessions, ALICE) == [[memory_id], [dm_memory]]


async def test_why_for_someone_elses_memory_is_the_same_not_found_as_a_missing_one(
    world: World, sessions: SessionFactory
) -> None:
    bobs = await add_memory(sessions, BOB, "Bob's private note")

    await world.tell(ALICE, f"!memory why {bobs}", mention=False)
    await world.tell(ALICE, f"!memory why {bobs + 1000}", mention=False)

    first, second = world.channel_texts(CHANNEL_A)[-2:]
    assert first.replace(str(bobs), "N") == second.replace(str(bobs + 1000), "N")
    assert world.stack.discord.dms_to(ALICE) == []
    assert "private" not in first


async def test_export_holds_every_memory_of_a_person_with_25_and_their_history(
    world: World, sessions: SessionFactory
) -> None:
    ids = [await add_memory(sessions, ALICE, f"memory number {n}") for n in range(24)]
    await world.tell(ALICE, "I keep bees on the roof")  # the 25th, with an origin and source
    await add_memory(sessions, BOB, "Bob's own note")
    await world.tell(ALICE, "!memory pause", mention=False)

    await world.tell(ALICE, "!memory export", mention=False)

    [dm] = [m for m in world.stack.discord.dms_to(ALICE) if m["attachments"]]
    exported = json.loads(world.stack.discord.attachment(dm, f"memories-{ALICE}.json"))
    assert exported["user_id"] == str(ALICE)
    assert len(exported["memories"]) == 25
    assert {m["id"] for m in exported["memories"]} >= set(ids)
    assert all("Bob" not in m["content"] for m in exported["memories"])
    learned = next(m for m in exported["memories"] if "bees" in m["content"])
    assert learned["origin"] == {"kind": "guild", "guild_id": str(GUILD_A)}
    assert learned["sources"][0]["link"].startswith(f"https://discord.com/channels/{GUILD_A}/")
    assert exported["learning_paused"] is True
    assert {row["action"] for row in exported["ledger"]} == {"add"}  # reads are counted
    assert "sent you a DM" in world.channel_texts(CHANNEL_A)[-1]
    [exported_ids] = await command_reads(sessions, ALICE)  # the export is one ledger read
    assert sorted(exported_ids) == sorted(m["id"] for m in exported["memories"])
    counted = {(c["actor"], c["reads"]) for c in exported["reads"]["by_actor_and_month"]}
    assert ("command", 1) in counted  # this export's own read
    assert exported["reads"]["total"] == len(await reads_of(sessions, ALICE))


async def test_a_closed_dm_gets_the_channel_notice_and_leaks_nothing(
    world: World, sessions: SessionFactory
) -> None:
    await world.tell(ALICE, "I keep bees on the roof")
    world.stack.discord.dm_closed.add(ALICE)

    for command in ("!memory show", "!memory export", "!memory show all"):
        await world.tell(ALICE, command, mention=False)

    notices = world.channel_texts(CHANNEL_A)[-3:]
    assert all("couldn't send you a direct message" in notice for notice in notices)
    assert all("bees" not in notice for notice in notices)
    assert world.stack.discord.dms_to(ALICE) == []


async def test_the_mention_form_works_too(world: World, sessions: SessionFactory) -> None:
    await world.tell(ALICE, "I keep bees on the roof")

    await world.tell(ALICE, "memory show")  # "@bot memory show"
    await world.tell(ALICE, "memory export")

    assert "bees" in world.dm_text(ALICE)
    assert any(m["attachments"] for m in world.stack.discord.dms_to(ALICE))
    assert f"<@{BOT_ID}> memory show" not in world.reply_prompts()[-1]  # no model reply
