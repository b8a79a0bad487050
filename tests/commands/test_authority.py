"""Authority, through the real webhook, worker and database: staff act only inside the guild
where they give a command (a role counts only as held there), operators do what reaches past
one guild, a refused command is answered and changes nothing, and every act is logged with
the actor's id and guild."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Sequence
from typing import Any

import pytest
from sqlalchemy import func, select

from app.commands.authority import Authority, Refusal
from app.commands.invocation import Invocation
from app.commands.parser import StaffMemory, StaffPin
from app.config import Settings
from app.db import SessionFactory
from app.frames.events import MessageCreate
from app.models.memory import Memory, MemoryLog
from app.models.structured import Pin
from tests.support.frames import message_create, next_id
from tests.support.trust_env import (
    ALICE,
    BOB,
    CAROL,
    CHANNEL_A,
    CHANNEL_B,
    DM_CHANNELS,
    GUILD_A,
    GUILD_B,
    World,
    trust_world,
)

MOD_ROLE_A = 7001  # a role of guild A that STAFF_ROLE_IDS names
OPERATOR = 2009
CHANNEL_OF = {GUILD_A: CHANNEL_A, GUILD_B: CHANNEL_B}
DM_OF = {**DM_CHANNELS, OPERATOR: 909}
DM_FACT = "my biopsy result came back benign"
A_FACT = "I run the Tuesday book club"
B_FACT = "I moderate the retro gaming server"


@pytest.fixture
async def world(
    settings: Settings, sessions: SessionFactory, redis: object, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[World]:
    async with trust_world(
        settings,
        monkeypatch,
        staff_role_ids=[MOD_ROLE_A],
        staff_user_ids=[CAROL],
        operator_user_ids=[OPERATOR],
    ) as w:
        w.stack.discord.dm_channels.update(DM_OF)  # a DM command and its answers: one channel
        yield w


def command(
    who: int, text: str, *, guild: int | None = GUILD_A, roles: Sequence[int] = ()
) -> dict[str, Any]:
    """``who`` gives a command in the guild's channel, or (``guild=None``) in their DM."""
    channel = CHANNEL_OF[guild] if guild is not None else DM_OF[who]
    return message_create(
        content=text,
        author_id=who,
        author_name=f"user{who}",
        channel_id=channel,
        guild_id=guild,
        message_id=next_id(),
        roles=list(roles),
    )


async def give(world: World, *frames: dict[str, Any]) -> list[str]:
    """Deliver the commands one after another; what the bot answered in their channels."""
    for frame in frames:
        await world.stack.deliver(frame)
    channels = {int(frame["d"]["channel_id"]) for frame in frames}
    return [m["content"] for m in world.stack.discord.posted if int(m["channel_id"]) in channels]


async def pins(sessions: SessionFactory) -> dict[int, tuple[str, int | None, str]]:
    async with sessions() as session:
        rows = await session.scalars(select(Pin).order_by(Pin.id))
        return {p.id: (p.scope, p.guild_id, p.content) for p in rows}


async def pin_ids(sessions: SessionFactory) -> dict[str, int]:
    return {content: pin_id for pin_id, (_, _, content) in (await pins(sessions)).items()}


def acts(caplog: pytest.LogCaptureFixture) -> list[tuple[str, object, object, object]]:
    """The staff log lines: (event, actor id, guild id, authority)."""
    return [
        (
            r.getMessage(),
            r.__dict__.get("staff_id"),
            r.__dict__.get("guild_id"),
            r.__dict__.get("authority"),
        )
        for r in caplog.records
        if r.name == "app.commands.staff"
    ]


# --- the pure decision ---------------------------------------------------------------------


def message(author: int, *, guild: int | None, roles: Sequence[int] = ()) -> Invocation:
    given = MessageCreate.model_validate(command(author, "!bot x", guild=guild, roles=roles)["d"])
    return Invocation.of_message(given, str(given.id))


def test_a_role_counts_only_in_the_guild_whose_frame_carries_it(settings: Settings) -> None:
    staffed = settings.model_copy(update={"staff_role_ids": [MOD_ROLE_A]})
    in_a = Authority.of(message(BOB, guild=GUILD_A, roles=[MOD_ROLE_A]), staffed)
    in_b = Authority.of(message(BOB, guild=GUILD_B), staffed)
    by_dm = Authority.of(message(BOB, guild=None), staffed)
    assert (in_a.staff_here, in_b.staff_here, by_dm.staff_here) == (True, False, False)
    assert in_a.refusal(StaffPin("channel", "x")) is None
    assert in_a.refusal(StaffPin("global", "x")) is Refusal.GLOBAL_PIN
    assert in_b.refusal(StaffPin("channel", "x")) is Refusal.NOT_STAFF
    assert by_dm.refusal(StaffMemory(ALICE)) is Refusal.BY_DM


def test_a_staff_user_id_is_staff_in_every_guild_but_never_by_dm(settings: Settings) -> None:
    staffed = settings.model_copy(
        update={"staff_user_ids": [CAROL], "operator_user_ids": [OPERATOR]}
    )
    assert Authority.of(message(CAROL, guild=GUILD_B), staffed).refusal(StaffMemory(ALICE)) is None
    by_dm = Authority.of(message(CAROL, guild=None), staffed)
    assert by_dm.refusal(StaffMemory(ALICE)) is Refusal.BY_DM
    operator = Authority.of(message(OPERATOR, guild=None), staffed)
    assert operator.refusal(StaffMemory(ALICE)) is None and operator.reach.is_dm


def test_who_may_remove_a_pin(settings: Settings) -> None:
    staffed = settings.model_copy(
        update={"staff_user_ids": [CAROL], "operator_user_ids": [OPERATOR]}
    )
    staff_a = Authority.of(message(CAROL, guild=GUILD_A), staffed)
    operator_a = Authority.of(message(OPERATOR, guild=GUILD_A), staffed)
    assert staff_a.unpin_refusal("channel", GUILD_A) is None
    assert staff_a.unpin_refusal("channel", GUILD_B) is Refusal.OTHER_GUILD_PIN
    assert staff_a.unpin_refusal("channel", None) is Refusal.OTHER_GUILD_PIN
    assert staff_a.unpin_refusal("global", None) is Refusal.GLOBAL_UNPIN
    assert all(
        operator_a.unpin_refusal(scope, guild) is None
        for scope, guild in (("channel", GUILD_B), ("global", None), ("channel", None))
    )


# --- through the webhook and the worker ----------------------------------------------------


async def test_role_staff_pin_their_channel_but_neither_globally_nor_remove_others_pins(
    world: World, sessions: SessionFactory, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="app.commands.staff")
    await world.stack.deliver(
        command(OPERATOR, "!bot pin channel Guild B meets on Sundays", guild=GUILD_B),
        command(OPERATOR, "!bot pin global Be kind to newcomers"),
    )
    before = await pin_ids(sessions)
    b_pin, global_pin = before["Guild B meets on Sundays"], before["Be kind to newcomers"]
    mod = [MOD_ROLE_A]

    answers = await give(
        world,
        command(BOB, "!bot pin channel Movie night is every Friday", roles=mod),
        command(BOB, "!bot pin global Bob's rules apply everywhere", roles=mod),
        command(BOB, f"!bot unpin {b_pin}", roles=mod),
        command(BOB, f"!bot unpin {global_pin}", roles=mod),
    )

    after = await pin_ids(sessions)
    a_pin = after["Movie night is every Friday"]
    assert set(after) == {*before, "Movie night is every Friday"}
    assert (await pins(sessions))[a_pin] == ("channel", GUILD_A, "Movie night is every Friday")
    assert answers[-4:] == [
        f"Pinned for this channel with id {a_pin}.",
        Refusal.GLOBAL_PIN,
        Refusal.OTHER_GUILD_PIN,
        Refusal.GLOBAL_UNPIN,
    ]
    assert ("staff pin added", BOB, GUILD_A, "staff") in acts(caplog)
    assert ("staff command refused", BOB, GUILD_A, "staff") in acts(caplog)
    assert acts(caplog).count(("staff unpin refused", BOB, GUILD_A, "staff")) == 2

    # The same member's role is guild A's: in guild B's frame it is not there.
    refused = await give(world, command(BOB, f"!bot unpin {b_pin}", guild=GUILD_B))
    assert refused[-1] == Refusal.NOT_STAFF and b_pin in (await pins(sessions))
    await give(world, command(BOB, f"!bot unpin {a_pin}", roles=mod))
    assert a_pin not in await pins(sessions)


async def test_operators_pin_globally_and_remove_any_pin_from_any_guild(
    world: World, sessions: SessionFactory, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="app.commands.staff")
    await world.stack.deliver(
        command(CAROL, "!bot pin channel Guild B meets on Sundays", guild=GUILD_B),
    )
    b_pin = (await pin_ids(sessions))["Guild B meets on Sundays"]

    answers = await give(
        world,
        command(OPERATOR, "!bot pin global Be kind to newcomers"),
        command(OPERATOR, "!bot pin channel Movie night is every Friday"),
        command(OPERATOR, f"!bot unpin {b_pin}"),
    )
    made = await pin_ids(sessions)
    global_pin = made["Be kind to newcomers"]
    answers += await give(world, command(OPERATOR, f"!bot unpin {global_pin}"))

    assert set(await pin_ids(sessions)) == {"Movie night is every Friday"}
    assert answers[-4:] == [
        f"Pinned for every channel with id {global_pin}.",
        f"Pinned for this channel with id {made['Movie night is every Friday']}.",
        f"Removed pin {b_pin}.",
        f"Removed pin {global_pin}.",
    ]
    assert ("staff pin removed", OPERATOR, GUILD_A, "operator") in acts(caplog)
    assert ("staff pin added", CAROL, GUILD_B, "staff") in acts(caplog)


async def staff_reads(sessions: SessionFactory) -> int:
    async with sessions() as session:
        count = await session.scalar(
            select(func.count()).select_from(MemoryLog).where(MemoryLog.actor == "staff")
        )
    return int(count or 0)


async def alice_told_everywhere(world: World, sessions: SessionFactory) -> dict[str, int]:
    """Alice tells one fact in her DM, one in guild A and one in guild B: memory ids by fact."""
    await world.tell(ALICE, DM_FACT, guild=None)
    await world.tell(ALICE, A_FACT)
    await world.tell(ALICE, B_FACT, guild=GUILD_B, channel=CHANNEL_B)
    async with sessions() as session:
        rows = (await session.scalars(select(Memory).where(Memory.user_id == ALICE))).all()
    return {fact: m.id for m in rows for fact in (DM_FACT, A_FACT, B_FACT) if fact in m.content}


async def test_a_staff_member_by_dm_is_refused_unless_an_operator(
    world: World, sessions: SessionFactory, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="app.commands.staff")
    ids = await alice_told_everywhere(world, sessions)
    assert set(ids) == {DM_FACT, A_FACT, B_FACT}

    refused = await give(
        world,
        command(CAROL, f"!bot memory {ALICE}", guild=None),
        command(CAROL, f"!bot forget-fact {ids[B_FACT]}", guild=None),
    )

    assert refused == [Refusal.BY_DM, Refusal.BY_DM]
    assert await staff_reads(sessions) == 0
    assert ("staff command refused", CAROL, None, "staff") in acts(caplog)

    await world.stack.deliver(command(OPERATOR, f"!bot memory {ALICE}", guild=None))

    listing = "\n".join(m["content"] for m in world.stack.discord.dms_to(OPERATOR))
    assert all(fact in listing for fact in (DM_FACT, A_FACT, B_FACT))
    assert ("staff memory listing", OPERATOR, None, "operator") in acts(caplog)


async def test_guild_staff_list_and_forget_only_what_was_learned_in_their_guild(
    world: World, sessions: SessionFactory
) -> None:
    ids = await alice_told_everywhere(world, sessions)

    answers = await give(
        world,
        command(BOB, f"!bot memory <@{ALICE}>", roles=[MOD_ROLE_A]),
        command(BOB, f"!bot forget-fact {ids[B_FACT]}", roles=[MOD_ROLE_A]),
        command(BOB, f"!bot forget-fact {ids[DM_FACT]}", roles=[MOD_ROLE_A]),
    )

    listing = world.dm_text(BOB)
    assert A_FACT in listing and B_FACT not in listing and DM_FACT not in listing
    assert answers[-2:] == [
        f"No memory with id {ids[B_FACT]} was found.",
        f"No memory with id {ids[DM_FACT]} was found.",
    ]
    async with sessions() as session:
        left = set(await session.scalars(select(Memory.id).where(Memory.user_id == ALICE)))
    assert left == set(ids.values())
