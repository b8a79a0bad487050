"""MEM-07: staff review and edit memories and pins; non-staff are refused; all is logged."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator

import pytest
from sqlalchemy import select

from app.commands.authority import Refusal
from app.commands.dispatch import handle_command
from app.commands.parser import parse_command
from app.commands.staff import LISTING_LIMIT
from app.config import Settings
from app.db import SessionFactory
from app.frames.events import MessageCreate
from app.models.memory import Memory
from app.models.structured import Pin
from tests.support.commands import as_typed
from tests.support.frames import message_create, parsed_message
from tests.support.memory_env import (
    BOT_ID,
    MemoryEnv,
    add_memory,
    ledger_rows,
    memories_of,
    memory_env,
    read_ids,
)

CHANNEL, GUILD = 500, 1
STAFF = 7
OPERATOR = 8
STAFF_ROLE = 900
MEMBER = 42
OTHER = 43
_ids = iter(range(10_000, 20_000))


@pytest.fixture
async def env(settings: Settings, sessions: SessionFactory) -> AsyncIterator[MemoryEnv]:
    staffed = settings.model_copy(
        update={
            "staff_user_ids": [STAFF],
            "staff_role_ids": [STAFF_ROLE],
            "operator_user_ids": [OPERATOR],
        }
    )
    async with memory_env(staffed, sessions) as env:
        yield env


async def say(
    env: MemoryEnv, content: str, *, author: int = STAFF, roles: tuple[int, ...] = ()
) -> MessageCreate:
    message = parsed_message(
        message_create(
            content=content,
            author_id=author,
            message_id=next(_ids),
            channel_id=CHANNEL,
            guild_id=GUILD,
            roles=roles,
        )
    )
    command = parse_command(content, BOT_ID)
    assert command is not None
    await handle_command(env.services, command, *as_typed(env.services, message))
    return message


async def pins(sessions: SessionFactory) -> list[Pin]:
    async with sessions() as session:
        return list((await session.scalars(select(Pin).order_by(Pin.id))).all())


async def test_mem07_memory_listing_goes_by_dm_to_staff_and_is_logged_as_staff_read(
    env: MemoryEnv,
) -> None:
    first = await add_memory(env.sessions, MEMBER, "Likes hiking in the Alps")
    second = await add_memory(env.sessions, MEMBER, "Has a cat named Miso", age_days=1)
    await add_memory(env.sessions, OTHER, "Plays the cello")

    await say(env, f"!bot memory <@{MEMBER}>")

    dm = "\n".join(m["content"] for m in env.discord.dms_to(STAFF))
    assert f"`{first}`" in dm and "Likes hiking in the Alps" in dm
    assert f"`{second}`" in dm and "Has a cat named Miso" in dm
    assert "cello" not in dm
    channel = env.discord.texts_in(CHANNEL)
    assert len(channel) == 1 and "DM" in channel[0]
    assert "hiking" not in channel[0] and "Miso" not in channel[0]
    reads = [r for r in await ledger_rows(env.sessions) if r.action == "read"]
    assert [(r.actor, r.user_id, r.after) for r in reads] == [("staff", MEMBER, [first, second])]
    assert str(STAFF) in reads[0].reason


async def test_mem07_memory_listing_is_never_posted_in_the_channel_when_the_dm_fails(
    env: MemoryEnv,
) -> None:
    await add_memory(env.sessions, MEMBER, "Secretly learning the banjo")
    env.discord.dm_closed.add(STAFF)

    await say(env, f"!bot memory {MEMBER}")

    channel = env.discord.texts_in(CHANNEL)
    assert len(channel) == 1 and "couldn't send you a direct message" in channel[0]
    assert all("banjo" not in m["content"] for m in env.discord.posted)


async def test_mem07_forget_fact_deletes_anyones_memory_and_logs_staff_delete(
    env: MemoryEnv,
) -> None:
    doomed = await add_memory(env.sessions, MEMBER, "Works night shifts")
    kept = await add_memory(env.sessions, MEMBER, "Speaks Portuguese")

    await say(env, f"!bot forget-fact {doomed}")

    assert await memories_of(env.sessions, MEMBER) == {kept: "Speaks Portuguese"}
    [row] = await ledger_rows(env.sessions)
    assert (row.action, row.actor, row.memory_id, row.user_id) == (
        "delete",
        "staff",
        doomed,
        MEMBER,
    )
    assert row.before is not None and row.before["content"] == "Works night shifts"
    assert row.after is None and str(STAFF) in row.reason
    assert env.discord.texts_in(CHANNEL) == [
        f"Deleted memory {doomed} (it belonged to `{MEMBER}`)."
    ]


async def test_mem07_forget_fact_with_an_unknown_id_says_not_found_and_changes_nothing(
    env: MemoryEnv,
) -> None:
    kept = await add_memory(env.sessions, MEMBER, "Speaks Portuguese")

    await say(env, f"!bot forget-fact {kept + 999}")

    assert await memories_of(env.sessions, MEMBER) == {kept: "Speaks Portuguese"}
    assert await ledger_rows(env.sessions) == []
    assert env.discord.texts_in(CHANNEL) == [f"No memory with id {kept + 999} was found."]


async def test_mem07_pin_and_unpin_channel_and_global_are_operator_facts_and_logged(
    env: MemoryEnv, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="app.commands.staff")

    await say(env, "!bot pin channel Movie night is every Friday")
    await say(env, "!bot pin global Be kind to newcomers", author=OPERATOR)

    channel_pin, global_pin = await pins(env.sessions)
    assert (channel_pin.scope, channel_pin.channel_id, channel_pin.content) == (
        "channel",
        CHANNEL,
        "Movie night is every Friday",
    )
    assert (global_pin.scope, global_pin.channel_id, global_pin.content) == (
        "global",
        None,
        "Be kind to newcomers",
    )
    assert {p.source for p in (channel_pin, global_pin)} == {"operator"}
    assert (channel_pin.created_by, global_pin.created_by) == (STAFF, OPERATOR)
    assert env.discord.texts_in(CHANNEL) == [
        f"Pinned for this channel with id {channel_pin.id}.",
        f"Pinned for every channel with id {global_pin.id}.",
    ]

    await say(env, f"!bot unpin {channel_pin.id}")
    await say(env, f"!bot unpin {channel_pin.id}")

    assert [p.id for p in await pins(env.sessions)] == [global_pin.id]
    assert env.discord.texts_in(CHANNEL)[-2:] == [
        f"Removed pin {channel_pin.id}.",
        f"No pin with id {channel_pin.id} was found.",
    ]
    logged = [
        (r.getMessage(), r.__dict__.get("staff_id"), r.__dict__.get("pin_id"))
        for r in caplog.records
    ]
    assert ("staff pin added", STAFF, channel_pin.id) in logged
    assert ("staff pin added", OPERATOR, global_pin.id) in logged
    assert ("staff pin removed", STAFF, channel_pin.id) in logged
    assert await ledger_rows(env.sessions) == []  # pins are not memories


async def test_mem07_a_member_with_a_staff_role_may_use_staff_commands(env: MemoryEnv) -> None:
    await say(env, "!bot pin channel Quiet hours after 23:00", author=OTHER, roles=(STAFF_ROLE,))

    [pin] = await pins(env.sessions)
    assert pin.created_by == OTHER


@pytest.mark.parametrize(
    "content",
    ["!bot memory <@42>", "!bot forget-fact {memory}", "!bot pin global X", "!bot unpin {pin}"],
)
async def test_mem07_non_staff_are_refused_and_nothing_changes(
    env: MemoryEnv, content: str
) -> None:
    memory = await add_memory(env.sessions, MEMBER, "Enjoys chess")
    async with env.sessions() as session, session.begin():
        pin = Pin(scope="global", channel_id=None, content="Existing pin", created_by=STAFF)
        session.add(pin)
        await session.flush()
        pin_id = pin.id

    await say(env, content.format(memory=memory, pin=pin_id), author=OTHER, roles=(1, 2))

    assert env.discord.texts_in(CHANNEL) == [Refusal.NOT_STAFF]
    assert env.discord.dms_to(OTHER) == []
    assert await memories_of(env.sessions, MEMBER) == {memory: "Enjoys chess"}
    assert [p.id for p in await pins(env.sessions)] == [pin_id]
    assert await ledger_rows(env.sessions) == []


async def test_mem07_a_long_listing_shows_the_newest_and_says_how_many_are_left_out(
    env: MemoryEnv,
) -> None:
    async with env.sessions() as session, session.begin():
        for n in range(LISTING_LIMIT + 3):
            session.add(Memory(user_id=MEMBER, content=f"fact number {n}"))

    await say(env, f"!bot memory {MEMBER}")

    dm = "\n".join(m["content"] for m in env.discord.dms_to(STAFF))
    assert dm.count("fact number") == LISTING_LIMIT and "…and 3 older not shown." in dm
    [read] = await ledger_rows(env.sessions)
    assert len(read_ids(read)) == LISTING_LIMIT
