"""MEM-04 on real Postgres: the reply prompt's memory part holds the global and this channel's
pins, the speaker's memories (or every participant's with MEMORY_RECALL_SCOPE=participants),
never a non-participant's, every read logged, and the newest episodes as the channel summary."""

from __future__ import annotations

from sqlalchemy import select

from app.channel.exchange import Place
from app.config import RecallScope, Settings
from app.db import SessionFactory, unit_of_work
from app.episodes.store import add_episode
from app.memory.recall import PromptMemory, prompt_memory, recall_user_ids
from app.models.memory import MemoryLog
from app.models.structured import Pin
from tests.support.memory_env import BOT_ID, add_memory, read_ids

CHANNEL, OTHER = 500, 501
ALICE, BOB, CAROL = 11, 22, 33
NAMES = {ALICE: "Alice", BOB: "Bob", CAROL: "Carol"}


async def world(sessions: SessionFactory) -> None:
    await add_memory(sessions, ALICE, "Alice plays the cello.")
    await add_memory(sessions, BOB, "Bob is training for a marathon.")
    await add_memory(sessions, CAROL, "Carol is moving to Lisbon.")
    async with unit_of_work(sessions) as session:
        session.add_all(
            [
                Pin(
                    scope="global",
                    channel_id=None,
                    content="The server's name is Hearth.",
                    created_by=1,
                ),
                Pin(
                    scope="channel",
                    channel_id=CHANNEL,
                    content="This is the music channel.",
                    created_by=1,
                ),
                Pin(
                    scope="channel",
                    channel_id=OTHER,
                    content="This is the food channel.",
                    created_by=1,
                ),
            ]
        )
        for n in range(5):
            await add_episode(session, CHANNEL, f"music episode {n}", cap=10, sources=[])
        await add_episode(session, OTHER, "food episode", cap=10, sources=[])


async def recall(
    sessions: SessionFactory, settings: Settings, *, participants: list[int]
) -> PromptMemory:
    async with unit_of_work(sessions) as session:
        return await prompt_memory(
            session,
            settings,
            channel_id=CHANNEL,
            place=Place(1),
            speaker_id=ALICE,
            names=NAMES,
            participant_ids=participants,
        )


async def reads(sessions: SessionFactory) -> list[tuple[int, str, list[int]]]:
    async with sessions() as session:
        rows = await session.scalars(select(MemoryLog).order_by(MemoryLog.id))
        return [(r.user_id, r.actor, read_ids(r)) for r in rows if r.action == "read"]


async def test_mem04_default_scope_is_the_speaker_with_pins_and_episodes(
    settings: Settings, sessions: SessionFactory
) -> None:
    await world(sessions)

    memory = await recall(sessions, settings, participants=[BOB, ALICE])

    block = memory.memory_block or ""
    assert "The server's name is Hearth." in block
    assert "This is the music channel." in block
    assert "food channel" not in block
    assert "Alice plays the cello." in block
    assert "Bob" not in block and "Carol" not in block
    assert block.index("Hearth") < block.index("music channel") < block.index("cello")
    summary = memory.channel_summary or ""
    assert all(f"music episode {n}" in summary for n in (2, 3, 4))
    assert summary.index("episode 2") < summary.index("episode 3") < summary.index("episode 4")
    assert "episode 1" not in summary and "food" not in summary
    assert await reads(sessions) == [(ALICE, "reply", [1])]


async def test_mem04_participants_scope_adds_the_history_tails_authors_only(
    settings: Settings, sessions: SessionFactory
) -> None:
    await world(sessions)
    participants = settings.model_copy(update={"memory_recall_scope": RecallScope.PARTICIPANTS})

    memory = await recall(sessions, participants, participants=[BOB, BOT_ID, ALICE, BOB])

    block = memory.memory_block or ""
    assert "Alice plays the cello." in block
    assert "Bob is training for a marathon." in block
    assert "Carol" not in block  # not a participant: never loaded, never logged
    assert "About Alice" in block and "About Bob" in block
    assert await reads(sessions) == [(ALICE, "reply", [1]), (BOB, "reply", [2])]


async def test_mem04_a_read_that_finds_nothing_is_still_logged(
    settings: Settings, sessions: SessionFactory
) -> None:
    memory = await recall(sessions, settings, participants=[])

    assert memory == PromptMemory(None, None)
    assert await reads(sessions) == [(ALICE, "reply", [])]


def test_mem04_recall_user_ids_is_scoped() -> None:
    speaker_only = recall_user_ids(
        RecallScope.SPEAKER, speaker_id=ALICE, participant_ids=[BOB], bot_user_id=BOT_ID
    )
    everyone = recall_user_ids(
        RecallScope.PARTICIPANTS,
        speaker_id=ALICE,
        participant_ids=[BOB, BOT_ID, ALICE, CAROL, BOB],
        bot_user_id=BOT_ID,
    )

    assert speaker_only == [ALICE]
    assert everyone == [ALICE, BOB, CAROL]
