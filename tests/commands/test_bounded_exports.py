"""`!memory export` and `!memory show all` stay bounded for a big profile, through the real
webhook, worker and Postgres, with the Discord fake recording every upload: the ledger's reads
are counted per actor and month instead of listed, the changes are listed in full, long
documents are split into whole files each under Discord's limit, and what cannot fit answers
once that it is too large, with no retry. (Timings: `python -m bench.export`.)"""

from __future__ import annotations

import json
from collections import Counter
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import select

from app.commands.answer import MAX_FILES, TOO_LARGE
from app.db import SessionFactory
from app.discord.client import MAX_UPLOAD_BYTES
from app.discord.errors import REQUEST_TOO_LARGE
from app.kit.clock import utcnow
from app.models.memory import MemoryLog
from app.vocabulary import Action, Actor
from tests.support.inbox import inbox_row
from tests.support.ledger import (
    attachments,
    expected_reads,
    seed_changes,
    seed_memories,
    seed_reads,
)
from tests.support.memory_env import read_ids
from tests.support.trust_env import ALICE, BOB, CHANNEL_A, DM_CHANNELS, World


async def handled_once(sessions: SessionFactory, frame: dict[str, Any]) -> None:
    """The command's inbox row was handled by its first attempt: no retry, no dead letter."""
    row = await inbox_row(sessions, frame["d"]["id"])
    assert row.handled_at is not None and row.dead_at is None
    assert row.attempts == 1 and row.last_error is None


async def export_reads(sessions: SessionFactory, actor: Actor = Actor.COMMAND) -> list[list[int]]:
    """The memory ids each of Alice's reads by ``actor`` made during the test listed (the
    seeded reads are all dated 2024)."""
    async with sessions() as session:
        query = select(MemoryLog).where(
            MemoryLog.action == Action.READ,
            MemoryLog.actor == actor,
            MemoryLog.user_id == ALICE,
            MemoryLog.created_at > datetime(2025, 1, 1, tzinfo=UTC),
        )
        return [read_ids(row) for row in await session.scalars(query)]


async def test_an_export_of_200k_ledger_rows_counts_the_reads_and_lists_every_change(
    world: World, sessions: SessionFactory
) -> None:
    memories = await seed_memories(sessions, ALICE, 20)
    changes = await seed_changes(sessions, ALICE, memories, 1_000, chars=40)
    await seed_reads(sessions, ALICE, 199_000)
    await seed_reads(sessions, BOB, 1_000)  # someone else's, never counted

    command = await world.tell(ALICE, "!memory export", mention=False)

    [(dm, raw)] = attachments(world, ALICE)
    assert len(raw) <= MAX_UPLOAD_BYTES
    exported = json.loads(raw)
    assert sorted(m["id"] for m in exported["memories"]) == memories
    assert [row["id"] for row in exported["ledger"]] == changes  # in full, oldest first
    assert exported["ledger"][0]["after"]["content"].endswith("a" * 40)
    counted = Counter(
        {(c["actor"], c["month"]): c["reads"] for c in exported["reads"]["by_actor_and_month"]}
    )
    own = ("command", utcnow().strftime("%Y-%m"))  # this export is itself a read
    assert counted == expected_reads(199_000) + Counter({own: 1})
    assert exported["reads"]["total"] == 199_001
    assert "20 memories, the 1000 changes" in dm["content"]
    [read] = await export_reads(sessions)
    assert sorted(read) == memories
    await handled_once(sessions, command)


async def test_an_export_larger_than_one_file_is_split_into_whole_files_under_the_limit(
    world: World, sessions: SessionFactory
) -> None:
    memories = await seed_memories(sessions, ALICE, 50)
    changes = await seed_changes(sessions, ALICE, memories, 1_500, chars=5_000)  # ~15 MB

    command = await world.tell(ALICE, "!memory export", mention=False)

    files = attachments(world, ALICE)
    assert len(files) == 2
    assert [dm["attachments"][0]["filename"] for dm, _ in files] == [
        f"memories-{ALICE}.json",
        f"memories-{ALICE}-2.json",
    ]
    assert all(len(raw) <= MAX_UPLOAD_BYTES for _, raw in files)
    first, second = (json.loads(raw) for _, raw in files)
    assert (first["file"], second["file"]) == (1, 2)
    assert "reads" in first and "reads" not in second
    assert sorted(m["id"] for m in first["memories"] + second["memories"]) == memories
    assert [row["id"] for row in first["ledger"] + second["ledger"]] == changes
    assert "(file 1 of 2)" in files[0][0]["content"]
    assert "(file 2 of 2)" in files[1][0]["content"]
    assert "sent you a DM" in world.channel_texts(CHANNEL_A)[-1]
    await handled_once(sessions, command)


async def test_an_export_too_large_for_discord_answers_once_and_is_not_retried(
    world: World, sessions: SessionFactory
) -> None:
    memories = await seed_memories(sessions, ALICE, 50)
    room = MAX_FILES * MAX_UPLOAD_BYTES
    await seed_changes(sessions, ALICE, memories, room // 9_000, chars=5_000)  # over `room`

    command = await world.tell(ALICE, "!memory export", mention=False)

    assert world.stack.discord.dms_to(ALICE) == []  # nothing partial
    answers = world.channel_texts(CHANNEL_A)
    assert answers == [TOO_LARGE]
    assert "admin export" in TOO_LARGE
    assert len(await export_reads(sessions)) == 1  # it read them, and says so
    await handled_once(sessions, command)


async def test_the_admin_export_holds_what_discord_could_not_take_in_one_document(
    world: World, sessions: SessionFactory
) -> None:
    memories = await seed_memories(sessions, ALICE, 50)
    room = MAX_FILES * MAX_UPLOAD_BYTES
    changes = await seed_changes(sessions, ALICE, memories, room // 9_000, chars=5_000)
    await seed_reads(sessions, ALICE, 3_000)

    response = await world.admin("GET", f"/users/{ALICE}/export")

    assert response.status_code == 200
    assert response.headers["content-type"] == "application/json"
    assert len(response.content) > room
    exported = response.json()
    assert sorted(m["id"] for m in exported["memories"]) == memories
    assert [row["id"] for row in exported["ledger"]] == changes
    counted = Counter(
        {(c["actor"], c["month"]): c["reads"] for c in exported["reads"]["by_actor_and_month"]}
    )
    assert counted == expected_reads(3_000) + Counter({("admin", utcnow().strftime("%Y-%m")): 1})
    [read] = await export_reads(sessions, Actor.ADMIN)
    assert sorted(read) == memories


async def test_an_upload_discord_refuses_as_too_large_answers_once_and_is_not_retried(
    world: World, sessions: SessionFactory
) -> None:
    await seed_memories(sessions, ALICE, 5)
    fake = world.stack.discord
    fake.dm_channels[ALICE] = DM_CHANNELS[ALICE]
    fake.fail_next(f"POST /channels/{DM_CHANNELS[ALICE]}/messages", 413, code=REQUEST_TOO_LARGE)

    command = await world.tell(ALICE, "!memory export", mention=False)

    assert world.channel_texts(CHANNEL_A) == [TOO_LARGE]
    assert len(fake.calls_to("POST", f"/channels/{DM_CHANNELS[ALICE]}/messages")) == 1
    await handled_once(sessions, command)


async def test_show_all_for_a_big_profile_goes_as_files_under_the_limit(
    world: World, sessions: SessionFactory
) -> None:
    memories = await seed_memories(sessions, ALICE, 40_000, text_of="🐝" * 80)  # ~14 MB

    command = await world.tell(ALICE, "!memory show all", mention=False)

    files = attachments(world, ALICE)
    assert len(files) == 2
    assert all(len(raw) <= MAX_UPLOAD_BYTES for _, raw in files)
    lines = [line for _, raw in files for line in raw.decode().splitlines()]
    listed = [int(line.split("`")[1]) for line in lines if line.startswith("`")]
    assert listed == memories  # newest first (the seed ages each one a minute more), once each
    assert lines[0].startswith("Everything I remember about you")
    assert lines[-1].startswith("Where one came from")
    assert "All 40000 of your memories" in files[0][0]["content"]
    await handled_once(sessions, command)


async def test_show_all_too_large_for_discord_answers_once_and_is_not_retried(
    world: World, sessions: SessionFactory
) -> None:
    line = len(f"`100000` · added by hand · {'🐝' * 80}…\n".encode())
    room = MAX_FILES * MAX_UPLOAD_BYTES
    await seed_memories(sessions, ALICE, room // line + 1_000, text_of="🐝" * 80)

    command = await world.tell(ALICE, "!memory show all", mention=False)

    assert world.stack.discord.dms_to(ALICE) == []
    assert world.channel_texts(CHANNEL_A) == [TOO_LARGE]
    await handled_once(sessions, command)
