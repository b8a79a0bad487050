"""Slash commands through the real relay (on a fake gateway), webhook and worker, answered on
a fake Discord held to Discord's API description and rules: ephemeral answers in the channel,
autocomplete from the asker's own memories, the same authority, one answer per interaction,
the deferral in Discord's three seconds even while Postgres is slow, files attached, and a
registration that can be repeated."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator

import asyncpg
import pytest
from prometheus_client import REGISTRY
from sqlalchemy import text

from app.__main__ import main
from app.commands.authority import Refusal
from app.db import SessionFactory
from app.memory import store
from app.models.memory import MemoryLog
from app.vocabulary import Action, Actor
from tests.support.frames import frame
from tests.support.memory_env import add_memory, ledger_rows, memories_of
from tests.support.slash import CHANNEL, GUILD, Slash, slash_world
from tests.support.stack import Stack
from tests.support.waiting import wait_until

ALICE, BOB = 4_100_000_000_000_000_201, 4_100_000_000_000_000_202


@pytest.fixture
async def slash(stack: Stack) -> AsyncIterator[Slash]:
    async with slash_world(stack) as world:
        yield world


def reads_by_command(rows: list[MemoryLog]) -> list[MemoryLog]:
    return [r for r in rows if r.action == Action.READ and r.actor == Actor.COMMAND]


async def test_memory_show_answers_a_member_with_closed_dms_ephemerally_with_the_read_logged(
    slash: Slash, sessions: SessionFactory
) -> None:
    tea = await add_memory(sessions, ALICE, "Alice likes green tea.")
    slash.discord.dm_closed.add(ALICE)

    used = await slash.use("/memory show", user=ALICE)
    [answer] = await slash.answer_of(used)

    assert used.callbacks == [{"type": 5, "data": {"flags": 64}}]  # deferred, ephemerally
    assert answer["ephemeral"] and answer["visible_to"] == str(ALICE)
    assert f"`{tea}`" in answer["content"] and "Alice likes green tea." in answer["content"]
    assert slash.discord.posted == []  # nothing in the channel for everyone, no DM
    [read] = reads_by_command(await ledger_rows(sessions))
    assert read.user_id == ALICE and read.after == [tea]


async def test_memory_forget_offers_only_the_askers_ids_and_deletes_only_theirs(
    slash: Slash, sessions: SessionFactory
) -> None:
    mine = await add_memory(sessions, ALICE, "Alice keeps a cat called Miso.")
    kept = await add_memory(sessions, ALICE, "Alice runs marathons.")
    bobs = await add_memory(sessions, BOB, "Bob keeps a cat too.")

    typing = await slash.use("/memory forget", {"memory": "cat"}, user=ALICE, focused="memory")
    choices = await slash.choices_of(typing)
    assert [c["value"] for c in choices] == [str(mine)]  # Bob's cat is never offered
    assert choices[0]["name"].startswith(f"{mine} · Alice keeps a cat")
    everything = await slash.use("/memory forget", {"memory": ""}, user=ALICE, focused="memory")
    offered = [c["value"] for c in await slash.choices_of(everything)]
    assert offered == ["all", str(kept), str(mine)]

    gone = await slash.use("/memory forget", {"memory": str(mine)}, user=ALICE)
    [answer] = await slash.answer_of(gone)
    assert answer["content"] == f"Done: I forgot memory {mine}."
    others = await slash.use("/memory forget", {"memory": str(bobs)}, user=ALICE)
    [refused] = await slash.answer_of(others)
    assert refused["content"] == f"I couldn't find a memory with id {bobs} among yours."

    assert await memories_of(sessions, ALICE) == {kept: "Alice runs marathons."}
    assert await memories_of(sessions, BOB) == {bobs: "Bob keeps a cat too."}
    # Keystrokes are counted reads, never a ledger row each.
    assert reads_by_command(await ledger_rows(sessions)) == []


async def test_bot_memory_by_a_member_who_is_not_staff_is_refused(
    slash: Slash, sessions: SessionFactory
) -> None:
    await add_memory(sessions, ALICE, "Alice likes green tea.")
    used = await slash.use("/bot memory", {"user": str(ALICE)}, user=BOB)
    [answer] = await slash.answer_of(used)
    assert answer["content"] == Refusal.NOT_STAFF
    assert [r for r in await ledger_rows(sessions) if r.actor == Actor.STAFF] == []


async def test_a_replayed_interaction_is_answered_once(
    slash: Slash, sessions: SessionFactory
) -> None:
    used = await slash.use("/memory pause", user=ALICE)
    [answer] = await slash.answer_of(used)
    already = _deferrals("already")

    # The relay delivers the frame again (its acknowledgement was lost): a duplicate, whose
    # deferral job still runs, and finds the interaction answered without asking Discord.
    assert await slash.stack.post(frame("INTERACTION_CREATE", slash.sent[used.id])) == {
        "status": "duplicate"
    }
    await wait_until(lambda: _deferrals("already") > already, within=20, what="the 2nd deferral")

    assert len([c for c in slash.discord.calls if c.path.endswith("/callback")]) == 1
    assert used.refused == [] and used.followups == []
    assert answer["content"].startswith("Paused")


def _deferrals(outcome: str) -> float:
    value = REGISTRY.get_sample_value("interaction_deferrals_total", {"outcome": outcome})
    return value or 0.0


async def test_the_deferral_is_sent_in_time_while_the_first_database_write_waits(
    slash: Slash, stack: Stack, sessions: SessionFactory
) -> None:
    """The inbox row the webhook must write is locked by another transaction for longer than
    Discord's three seconds: the deferral goes out anyway, and the answer follows once the
    write gets through."""
    await add_memory(sessions, ALICE, "Alice likes green tea.")
    interactions = slash.discord.interactions
    d = interactions.use("/memory show", user_id=ALICE, channel_id=CHANNEL, guild_id=GUILD)
    used = interactions.find(d["id"])
    blocker = await asyncpg.connect(stack.settings.database_url.replace("+asyncpg", ""))
    try:
        holding = blocker.transaction()
        await holding.start()
        await blocker.execute(
            "INSERT INTO inbox (id, event_type, payload) VALUES ($1, 'INTERACTION_CREATE', '{}')",
            f"interaction:{used.id}",
        )
        await slash.gateway.route(frame("INTERACTION_CREATE", d))
        await wait_until(lambda: used.callbacks != [], within=3, what="the deferral")
        assert used.refused == []  # accepted within Discord's three seconds
        await wait_until(
            lambda: interactions.clock() - used.created > 3.5,
            within=10,
            what="the write to have waited past three seconds",
        )
        assert await _inbox_row_missing(sessions, used.id)  # the write still waits
        await holding.rollback()
    finally:
        await blocker.close()
    [answer] = await slash.answer_of(used)
    assert "Alice likes green tea." in answer["content"]


async def _inbox_row_missing(sessions: SessionFactory, interaction_id: int) -> bool:
    async with sessions() as session:
        found = await session.scalar(
            text("SELECT count(*) FROM inbox WHERE id = :id"),
            {"id": f"interaction:{interaction_id}"},
        )
    return bool(found == 0)


async def test_memory_export_attaches_the_json_file(slash: Slash, sessions: SessionFactory) -> None:
    tea = await add_memory(sessions, ALICE, "Alice likes green tea.")
    used = await slash.use("/memory export", user=ALICE)
    [answer] = await slash.answer_of(used)
    assert [a["filename"] for a in answer["attachments"]] == [f"memories-{ALICE}.json"]
    exported = json.loads(slash.discord.interactions.file(answer, f"memories-{ALICE}.json"))
    assert [m["id"] for m in exported["memories"]] == [tea]
    assert len(reads_by_command(await ledger_rows(sessions))) == 1


async def test_registering_twice_leaves_one_set(
    stack: Stack, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("DISCORD_BOT_TOKEN", stack.discord.token)
    monkeypatch.setenv("DISCORD_API_BASE", stack.settings.discord_api_base)
    registered = stack.discord.interactions.commands
    # The command runs its own event loop, as from a shell: in a thread beside the fakes'.
    assert await asyncio.to_thread(main, ["register-commands"]) == 0
    first = {c["name"]: c["id"] for c in registered[None]}
    assert await asyncio.to_thread(main, ["register-commands"]) == 0
    assert {c["name"]: c["id"] for c in registered[None]} == first
    assert sorted(first) == ["bot", "forgetme", "memory"]
    assert await asyncio.to_thread(main, ["register-commands", "--guild", "77"]) == 0
    assert sorted(c["name"] for c in registered[77]) == ["bot", "forgetme", "memory"]
    assert "registered 3 commands globally" in capsys.readouterr().out


async def test_a_command_that_cannot_be_deferred_in_time_is_counted_and_never_run(
    slash: Slash, sessions: SessionFactory
) -> None:
    tea = await add_memory(sessions, ALICE, "Alice likes green tea.")
    late = REGISTRY.get_sample_value("interactions_unanswered_total", {"reason": "late"}) or 0.0
    interactions = slash.discord.interactions
    d = interactions.use(
        "/memory forget", {"memory": str(tea)}, user_id=ALICE, channel_id=CHANNEL, guild_id=GUILD
    )
    used = interactions.find(d["id"])
    interactions.clock = lambda: time.monotonic() + 5  # Discord got it five seconds ago
    await slash.gateway.route(frame("INTERACTION_CREATE", d))

    async def handled() -> bool:
        async with sessions() as session:
            at = await session.scalar(
                text("SELECT handled_at FROM inbox WHERE id = :id"),
                {"id": f"interaction:{used.id}"},
            )
        return at is not None

    await wait_until(handled, within=20, what="the event to be done")
    assert used.callbacks == [] and set(used.refused) == {10062}
    counted = REGISTRY.get_sample_value("interactions_unanswered_total", {"reason": "late"})
    assert counted == late + 1
    assert await memories_of(sessions, ALICE) == {tea: "Alice likes green tea."}  # not run


async def test_autocomplete_reads_are_counted_in_the_monthly_read_counts(
    slash: Slash, sessions: SessionFactory
) -> None:
    await add_memory(sessions, ALICE, "Alice likes green tea.")
    for typed in ("g", "gr"):
        used = await slash.use("/memory why", {"id": typed}, user=ALICE, focused="id")
        assert len(await slash.choices_of(used)) == 1
    async with sessions() as session:
        counts = await store.read_counts(session, ALICE)
    assert [(c.actor, c.reads) for c in counts] == [("command", 2)]
    assert reads_by_command(await ledger_rows(sessions)) == []
