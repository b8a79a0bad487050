"""MEMORY_RECALL=relevant through the real webhook, worker and Postgres: the memory that
answers the message reaches the prompt among forty, in Japanese too; a repeated statement
updates the old memory instead of adding a second; older messages of the same channel (never
another's, never deleted ones, never words said while paused, never an erased person's) join
the context with their dates; and MEMORY_RECALL=recent behaves exactly as before."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Collection
from datetime import timedelta
from typing import Any

import pytest
from sqlalchemy import func, select

from app.chat.fake import Text
from app.config import MemoryRecall, Settings
from app.db import SessionFactory
from app.kit.attribution import read_lines
from app.kit.clock import utcnow
from app.models.memory import Memory, MemoryLog
from app.turn.prompt import EARLIER_NOTE
from app.vocabulary import Actor
from tests.support.frames import next_id
from tests.support.memory_env import add_memory, add_message, read_ids
from tests.support.trust_env import (
    ALICE,
    BOB,
    CAROL,
    CHANNEL_A,
    CHANNEL_B,
    GUILD_A,
    World,
    trust_world,
    writer_or_reply,
)

CAT = "Alice has a cat named Miso."
SHELTER = "Miso was adopted from the shelter in March"
HOBBIES = ["chess", "tennis", "baking", "hiking", "jazz", "pottery", "sailing", "poetry"] * 5


@pytest.fixture
async def world(
    settings: Settings, sessions: SessionFactory, redis: object, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[World]:
    async with trust_world(settings, monkeypatch, memory_recall=MemoryRecall.RELEVANT) as w:
        yield w


@pytest.fixture
async def seed_world(
    settings: Settings, sessions: SessionFactory, redis: object, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[World]:
    """The code default, the seed's rule: MEMORY_RECALL=recent."""
    async with trust_world(settings, monkeypatch) as w:
        yield w


async def thirty_nine_notes(sessions: SessionFactory) -> None:
    for n in range(39):
        await add_memory(sessions, ALICE, f"Alice enjoys {HOBBIES[n]} on day {n}", age_days=n + 1)


async def reads_by(sessions: SessionFactory, actor: Actor) -> list[list[int]]:
    async with sessions() as session:
        rows = await session.scalars(
            select(MemoryLog)
            .where(MemoryLog.actor == actor, MemoryLog.action == "read")
            .order_by(MemoryLog.id)
        )
        return [read_ids(row) for row in rows]


async def count_memories(sessions: SessionFactory, user_id: int) -> int:
    async with sessions() as session:
        total = await session.scalar(select(func.count()).where(Memory.user_id == user_id))
        return int(total or 0)


async def older_lines(
    sessions: SessionFactory,
    lines: list[tuple[int, str, int, int]],
    *,
    fillers: int = 25,
    deleted: Collection[str] = (),
) -> None:
    """Messages said ``days`` ago (author, text, channel, days; the ``deleted`` texts as
    deleted ones), then ``fillers`` newer lines of small talk in CHANNEL_A, so the older
    ones are beyond the last 20."""
    names = {ALICE: "alice", BOB: "bob", CAROL: "carol"}
    for author, content, channel, days in lines:
        await add_message(
            sessions,
            id=next_id(),
            channel_id=channel,
            author_id=author,
            author_name=names[author],
            content=content,
            at=utcnow() - timedelta(days=days),
            guild_id=GUILD_A,
            deleted=content in deleted,
        )
    for n in range(fillers):
        await add_message(
            sessions,
            id=next_id(),
            channel_id=CHANNEL_A,
            author_id=CAROL,
            author_name="carol",
            content=f"small talk number {n}, nothing much",
            at=utcnow() - timedelta(hours=fillers - n),
            guild_id=GUILD_A,
        )


def day(days_ago: int) -> str:
    return f"{utcnow() - timedelta(days=days_ago):%Y-%m-%d}"


# --- memories ----------------------------------------------------------------------------


async def test_among_forty_memories_the_cat_reaches_the_prompt_for_how_is_miso(
    world: World, sessions: SessionFactory
) -> None:
    await thirty_nine_notes(sessions)
    cat = await add_memory(sessions, ALICE, CAT, age_days=60)

    await world.tell(ALICE, "how is Miso?")

    prompt = world.last_reply_prompt()
    assert f"- [{day(60)}] {CAT}" in prompt  # with the date it was learned
    assert prompt.count("\n- [") == 10  # still ten memories at most
    [read] = await reads_by(sessions, Actor.REPLY)
    assert cat in read and len(read) == 10


async def test_a_japanese_question_reaches_its_japanese_memory(
    world: World, sessions: SessionFactory
) -> None:
    await thirty_nine_notes(sessions)
    note = "アリスは毎週土曜日に書道教室に通っている"
    await add_memory(sessions, ALICE, note, age_days=75)

    await world.tell(ALICE, "最近、書道はどう？")

    assert note in world.last_reply_prompt()


async def test_a_statement_repeating_a_40_day_old_memory_updates_it_instead_of_adding(
    world: World, sessions: SessionFactory
) -> None:
    await thirty_nine_notes(sessions)
    old = await add_memory(sessions, ALICE, CAT, age_days=40)
    said = "Alice has a cat named Miso, a grey tabby."
    world.stack.model.responder = writer_says(said)

    await world.tell(ALICE, "my cat Miso is a grey tabby, did I tell you?")

    assert await count_memories(sessions, ALICE) == 40
    async with sessions() as session:
        row = await session.get(Memory, old)
        [change] = await session.scalars(
            select(MemoryLog).where(MemoryLog.action != "read").order_by(MemoryLog.id)
        )
    assert row is not None and row.content == said
    assert row.updated_at > utcnow() - timedelta(minutes=5)
    assert (change.action, change.memory_id, change.actor) == ("update", old, "extraction")
    # the write path's read found the old memory (so its verdict could see it)
    assert old in (await reads_by(sessions, Actor.EXTRACTION))[0]


async def test_under_recent_the_same_repeat_adds_a_second_row_as_before(
    seed_world: World, sessions: SessionFactory
) -> None:
    await thirty_nine_notes(sessions)
    await add_memory(sessions, ALICE, CAT, age_days=40)
    seed_world.stack.model.responder = writer_says("Alice has a cat named Miso, a grey tabby.")

    await seed_world.tell(ALICE, "how is Miso? my cat Miso is a grey tabby")

    assert await count_memories(sessions, ALICE) == 41
    prompt = seed_world.last_reply_prompt()
    assert CAT not in prompt and "- [" not in prompt  # the ten newest, undated
    [read] = await reads_by(sessions, Actor.REPLY)
    assert len(read) == 10


def writer_says(fact: str) -> Any:
    def answer(body: dict[str, Any]) -> Text:
        system = " ".join(block["text"] for block in body.get("system") or [])
        if "memory note" in system:
            return Text(json.dumps({"subject": "speaker", "fact": fact}))
        return writer_or_reply(body)

    return answer


async def test_a_dm_memory_never_reaches_a_guild_prompt_however_relevant(
    world: World, sessions: SessionFactory
) -> None:
    await thirty_nine_notes(sessions)
    await world.tell(ALICE, "my cat Miso has a sore paw", guild=None)

    await world.tell(ALICE, "how is Miso?")
    assert "sore paw" not in world.last_reply_prompt()

    await world.tell(ALICE, "how is Miso?", guild=None)
    assert "sore paw" in world.last_reply_prompt()


async def test_while_paused_a_repeat_changes_nothing_and_what_is_kept_still_serves(
    world: World, sessions: SessionFactory
) -> None:
    await thirty_nine_notes(sessions)
    old = await add_memory(sessions, ALICE, CAT, age_days=40)
    world.stack.model.responder = writer_says("Alice has a cat named Miso, a grey tabby.")
    await world.tell(ALICE, "!memory pause", mention=False)

    await world.tell(ALICE, "my cat Miso is a grey tabby, how is Miso?")

    async with sessions() as session:
        row = await session.get(Memory, old)
    assert row is not None and row.content == CAT  # not updated, not merged into
    assert row.updated_at < utcnow() - timedelta(days=39)
    assert await count_memories(sessions, ALICE) == 40
    assert f"{CAT}" in world.last_reply_prompt()  # still recalled for her reply


# --- older conversation ------------------------------------------------------------------


async def test_an_older_message_of_this_channel_reaches_the_prompt_and_no_other_channels(
    world: World, sessions: SessionFactory
) -> None:
    await older_lines(
        sessions,
        [
            (BOB, "Alice's cat Miso sleeps on the sunny windowsill all afternoon", CHANNEL_A, 60),
            (CAROL, "Miso is also the name of my goldfish", CHANNEL_B, 30),
            (BOB, SHELTER, CHANNEL_A, 50),
        ],
        deleted={SHELTER},
    )

    await world.tell(ALICE, "how is Miso?")

    [request] = [r for r in world.stack.model.requests if "memory note" not in str(r["system"])]
    first = read_lines(request["messages"][0]["content"])[0]
    assert (first["from"], first["date"]) == ("bob", day(60))
    assert first["text"].startswith("Alice's cat Miso sleeps on the sunny")
    assert any(EARLIER_NOTE in block["text"] for block in request["system"])
    prompt = world.last_reply_prompt()
    assert "goldfish" not in prompt and "shelter" not in prompt
    assert "small talk number 4," not in prompt  # the 21st newest: neither recent nor relevant
    assert "small talk number 24," in prompt  # the recent context is as it was


async def test_words_said_while_paused_never_come_back_as_older_conversation(
    world: World, sessions: SessionFactory
) -> None:
    await world.tell(ALICE, "!memory pause", mention=False)
    paused = world.say(ALICE, "Miso has a vet appointment on Friday", mention=False)
    paused["d"]["timestamp"] = (utcnow() - timedelta(days=10)).isoformat()
    await world.stack.deliver(paused)
    await world.tell(ALICE, "!memory resume", mention=False)
    await older_lines(sessions, [(ALICE, "Miso chased a moth around the kitchen", CHANNEL_A, 9)])

    await world.tell(BOB, "how is Miso doing?")

    prompt = world.last_reply_prompt()
    assert "Miso chased a moth" in prompt
    assert "vet appointment" not in prompt


async def test_an_erased_persons_older_messages_and_memories_never_come_back(
    world: World, sessions: SessionFactory
) -> None:
    await add_memory(sessions, CAROL, "Carol grows tomatoes in her garden.", age_days=20)
    await older_lines(sessions, [(CAROL, "Miso loves napping in my tomato garden", CHANNEL_A, 8)])
    await world.tell(CAROL, "!forgetme", mention=False)
    await older_lines(sessions, [], fillers=25)

    await world.tell(BOB, "how is Miso, is the tomato garden still there?")
    await world.tell(CAROL, "remember my tomato garden?")

    assert not any("napping" in prompt for prompt in world.reply_prompts())
    assert "Carol grows tomatoes" not in world.last_reply_prompt()


async def test_under_recent_no_older_message_joins_the_context(
    seed_world: World, sessions: SessionFactory
) -> None:
    await older_lines(
        sessions, [(BOB, "Alice's cat Miso sleeps on the sunny windowsill", CHANNEL_A, 60)]
    )

    await seed_world.tell(ALICE, "how is Miso?")

    prompt = seed_world.last_reply_prompt()
    assert "windowsill" not in prompt and "older messages" not in prompt
    [request] = [r for r in seed_world.stack.model.requests if "memory note" not in str(r)]
    first = read_lines(request["messages"][0]["content"])[0]
    assert first["from"] == "carol" and first["text"].startswith("small talk number 6,")
    assert "date" not in first
