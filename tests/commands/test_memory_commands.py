"""`!memory show | forget <id> | forget all` against FakeDiscord through the real client:
listings only by DM, no leaks on a closed DM, and nobody can forget someone else's memory."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from app.commands.answer import InChannel
from app.commands.invocation import Invocation
from app.commands.memory import memory_forget, memory_forget_all, memory_show
from app.config import Settings
from app.db import SessionFactory
from tests.support.commands import text_command
from tests.support.memory_env import (
    MemoryEnv,
    add_memory,
    ledger_rows,
    memories_of,
    memory_env,
    snapshot,
)

ALICE, BOB = 11, 22
CHANNEL, COMMAND = 500, 9001
LONG = "Alice is planning a long trip: " + "Kyoto, Nara, Osaka, Kobe, Himeji, " * 5 + "then home."


@pytest.fixture
async def env(settings: Settings, sessions: SessionFactory) -> AsyncIterator[MemoryEnv]:
    async with memory_env(settings, sessions) as world:
        yield world


def alice(env: MemoryEnv, trigger: int = COMMAND) -> tuple[Invocation, InChannel]:
    """Alice's text command in CHANNEL (a guild's), as the turn hands it over."""
    return text_command(env.services, ALICE, CHANNEL, None, trigger)


def channel_replies(env: MemoryEnv) -> list[tuple[str, str | None]]:
    return [
        (m["content"], (m["message_reference"] or {}).get("message_id"))
        for m in env.discord.messages_in(CHANNEL)
    ]


async def test_show_sends_ids_and_80_character_cuts_by_dm(env: MemoryEnv) -> None:
    short = await add_memory(env.sessions, ALICE, "Alice likes tea.", age_days=1)
    long = await add_memory(env.sessions, ALICE, LONG)
    await add_memory(env.sessions, BOB, "Bob is allergic to peanuts.")

    await memory_show(env.services, *alice(env))

    [dm] = env.discord.dms_to(ALICE)
    text = dm["content"]
    assert f"`{short}` · added by hand · Alice likes tea." in text
    assert f"`{long}` · added by hand · {LONG[:80]}…" in text
    assert LONG[:81] not in text
    assert text.index(f"`{long}`") < text.index(f"`{short}`")  # newest first
    assert "peanuts" not in text
    [(notice, reply_to)] = channel_replies(env)
    assert reply_to == str(COMMAND)
    assert "tea" not in notice and LONG[:20] not in notice
    [read] = await ledger_rows(env.sessions)
    assert (read.action, read.actor, read.user_id, read.after) == (
        "read",
        "command",
        ALICE,
        [long, short],
    )


async def test_show_with_no_memories_says_so_by_dm(env: MemoryEnv) -> None:
    await memory_show(env.services, *alice(env))

    [dm] = env.discord.dms_to(ALICE)
    assert "don't have any memories" in dm["content"]
    [read] = await ledger_rows(env.sessions)
    assert read.after == []


async def test_closed_dms_get_a_channel_notice_without_any_memory(env: MemoryEnv) -> None:
    await add_memory(env.sessions, ALICE, "Alice likes tea.")
    env.discord.dm_closed.add(ALICE)

    await memory_show(env.services, *alice(env))

    assert env.discord.dms_to(ALICE) == []
    [(notice, reply_to)] = channel_replies(env)
    assert "couldn't send you a direct message" in notice
    assert "tea" not in notice
    assert reply_to == str(COMMAND)


async def test_a_dm_that_fails_otherwise_also_stays_out_of_the_channel(env: MemoryEnv) -> None:
    await add_memory(env.sessions, ALICE, "Alice likes tea.")
    env.discord.fail_next("POST /users/@me/channels", 500)

    await memory_show(env.services, *alice(env))

    [(notice, _)] = channel_replies(env)
    assert "couldn't send you a direct message" in notice and "tea" not in notice


async def test_forget_own_memory_deletes_the_row_and_logs_its_before_state(
    env: MemoryEnv,
) -> None:
    mine = await add_memory(env.sessions, ALICE, "Alice likes tea.")
    kept = await add_memory(env.sessions, ALICE, "Alice plays chess.")

    await memory_forget(env.services, *alice(env), mine)

    assert await memories_of(env.sessions, ALICE) == {kept: "Alice plays chess."}
    [row] = await ledger_rows(env.sessions)
    assert (row.action, row.actor, row.memory_id, row.user_id) == ("delete", "command", mine, ALICE)
    assert snapshot(row.before)["content"] == "Alice likes tea." and row.after is None
    [(answer, reply_to)] = channel_replies(env)
    assert str(mine) in answer and "forgot" in answer and reply_to == str(COMMAND)


async def test_someone_elses_id_and_an_unknown_id_get_the_same_answer(env: MemoryEnv) -> None:
    bobs = await add_memory(env.sessions, BOB, "Bob is allergic to peanuts.")
    unknown = bobs + 1000

    await memory_forget(env.services, *alice(env), bobs)
    await memory_forget(env.services, *alice(env, COMMAND + 1), unknown)

    assert await memories_of(env.sessions, BOB) == {bobs: "Bob is allergic to peanuts."}
    assert await ledger_rows(env.sessions) == []
    [(for_bobs, _), (for_unknown, _)] = channel_replies(env)
    assert for_bobs.replace(str(bobs), "ID") == for_unknown.replace(str(unknown), "ID")
    assert "peanuts" not in for_bobs


async def test_forget_all_deletes_every_own_memory_logs_each_and_that_she_asked(
    env: MemoryEnv,
) -> None:
    ids = [await add_memory(env.sessions, ALICE, f"Alice fact {n}.") for n in range(3)]
    bobs = await add_memory(env.sessions, BOB, "Bob plays go.")

    await memory_forget_all(env.services, *alice(env))

    assert await memories_of(env.sessions, ALICE) == {}
    assert await memories_of(env.sessions, BOB) == {bobs: "Bob plays go."}
    *rows, asked = await ledger_rows(env.sessions)
    assert [(r.action, r.actor, r.memory_id) for r in rows] == [
        ("delete", "command", i) for i in ids
    ]
    assert [snapshot(r.before)["content"] for r in rows] == [f"Alice fact {n}." for n in range(3)]
    # One more row for the person: what keeps a later rollback from restoring anything.
    assert (asked.action, asked.actor, asked.memory_id, asked.user_id) == (
        "delete",
        "command",
        None,
        ALICE,
    )
    assert asked.after == {"forgot_all": 3}
    [(answer, _)] = channel_replies(env)
    assert "3" in answer


async def test_forget_all_with_nothing_to_forget_says_so_and_still_records_she_asked(
    env: MemoryEnv,
) -> None:
    await memory_forget_all(env.services, *alice(env))

    [(answer, _)] = channel_replies(env)
    assert "no memories" in answer
    [asked] = await ledger_rows(env.sessions)
    assert (asked.memory_id, asked.user_id, asked.after) == (None, ALICE, {"forgot_all": 0})
