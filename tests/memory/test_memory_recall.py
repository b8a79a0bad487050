"""Recall for the reply prompt: only the named people's memories, newest first, ten at most,
one logged read per person (even an empty one)."""

from __future__ import annotations

from datetime import UTC, datetime

from app.channel.exchange import Place
from app.db import SessionFactory
from app.memory.recall import recall_for_prompt, render_memory_block
from app.memory.records import MemoryRecord
from tests.support.memory_env import add_memory, ledger_rows

ALICE, BOB, CAROL = 11, 22, 33
GUILD = Place(1)


async def test_the_block_for_alice_holds_only_alices_memories(sessions: SessionFactory) -> None:
    await add_memory(sessions, ALICE, "Alice likes tea.", age_days=2)
    await add_memory(sessions, ALICE, "Alice is learning the cello.", age_days=1)
    await add_memory(sessions, BOB, "Bob is allergic to peanuts.")

    async with sessions() as session, session.begin():
        recalled = await recall_for_prompt(session, place=GUILD, user_ids=[ALICE])
    block = render_memory_block(recalled, {ALICE: "Alice"})

    assert [m.content for m in recalled] == ["Alice is learning the cello.", "Alice likes tea."]
    assert block is not None
    assert "Alice is learning the cello." in block and "Alice likes tea." in block
    assert "Bob" not in block and "peanuts" not in block
    [read] = await ledger_rows(sessions)
    assert (read.action, read.actor, read.user_id, read.memory_id) == ("read", "reply", ALICE, None)
    assert read.after == [m.id for m in recalled]


async def test_recall_is_capped_at_ten_most_recent(sessions: SessionFactory) -> None:
    for n in range(12):
        await add_memory(sessions, ALICE, f"fact {n}", age_days=12 - n)

    async with sessions() as session, session.begin():
        recalled = await recall_for_prompt(session, place=GUILD, user_ids=[ALICE])

    assert [m.content for m in recalled] == [f"fact {n}" for n in range(11, 1, -1)]


async def test_an_empty_profile_is_still_a_logged_read_and_no_block(
    sessions: SessionFactory,
) -> None:
    await add_memory(sessions, BOB, "Bob is allergic to peanuts.")

    async with sessions() as session, session.begin():
        recalled = await recall_for_prompt(session, place=GUILD, user_ids=[CAROL])

    assert recalled == []
    assert render_memory_block(recalled, {CAROL: "Carol"}) is None
    [read] = await ledger_rows(sessions)
    assert (read.user_id, read.actor, read.after) == (CAROL, "reply", [])


async def test_participants_each_get_their_own_read_and_section(sessions: SessionFactory) -> None:
    await add_memory(sessions, ALICE, "Alice likes tea.")
    await add_memory(sessions, BOB, "Bob plays go.")
    await add_memory(sessions, CAROL, "Carol is not in this conversation.")

    async with sessions() as session, session.begin():
        recalled = await recall_for_prompt(session, place=GUILD, user_ids=[ALICE, BOB, ALICE])
    block = render_memory_block(recalled, {ALICE: "Alice", BOB: "Bob"})

    assert block is not None
    assert block.index("About Alice:") < block.index("Alice likes tea.") < block.index("About Bob:")
    assert "Carol" not in block
    assert [r.user_id for r in await ledger_rows(sessions)] == [ALICE, BOB]


def test_render_falls_back_to_the_user_id_without_a_name() -> None:
    memory = MemoryRecord(1, 5, "likes tea", updated_at=datetime(2026, 1, 1, tzinfo=UTC))

    assert render_memory_block([memory], {}) is not None
    assert "About user 5:\n- likes tea" in (render_memory_block([memory], {}) or "")
