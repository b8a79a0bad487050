"""MEM-09 `!forgetme`, table by table: what the person wrote and what was made from it goes
(found by identity and recorded provenance), other people's own rows stay exactly as they
were, the ledger keeps only that an erasure happened, and the receipt holds counts only."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from datetime import UTC, date, datetime, timedelta

import pytest
from sqlalchemy import ColumnElement, func, select, text

from app.channel import store as channel_log
from app.commands.dispatch import handle_command
from app.commands.memory import memory_forget
from app.commands.parser import ForgetMe
from app.config import Settings
from app.db import SessionFactory, unit_of_work
from app.frames.events import Event, MessageCreate, parse_dispatch
from app.memory import store
from app.memory.records import Why
from app.memory.rollback import rollback_run
from app.models import Base
from app.models.agent import AgentSession
from app.models.channels import Channel
from app.models.inbox import InboxEvent
from app.models.memory import Memory
from app.models.messages import Message
from app.models.nightly import NightlyRun
from app.models.signals import Signal
from app.models.structured import Episode, Observation
from app.privacy import store as register
from app.privacy.erasure import STARTED, format_receipt, run_erasure
from app.privacy.identity import MENTION_TOKEN
from app.structured.retention import purge_expired
from app.vocabulary import Actor
from tests.support.commands import as_typed, text_command
from tests.support.frames import Frame, message_create
from tests.support.memory_env import MemoryEnv, add_memory, ledger_rows, memories_of, memory_env
from tests.support.waiting import someone_awaits_an_advisory_lock, wait_until

CHANNEL, GUILD = 500, 1
ALICE, BOB, BOT_MESSAGE = 42, 43, 2000
NAMES = {ALICE: ("alice_w", "Alice"), BOB: ("bob", None)}  # username, guild nick
SECRETS = ("sourdough", "quokka", "sunday")


@pytest.fixture
async def env(settings: Settings, sessions: SessionFactory) -> AsyncIterator[MemoryEnv]:
    async with memory_env(settings, sessions) as env:
        yield env


def said(message_id: int, content: str, *, by: int = ALICE, reply_to: Frame | None = None) -> Frame:
    username, nick = NAMES[by]
    return message_create(
        content=content,
        author_id=by,
        author_name=username,
        nick=nick,
        message_id=message_id,
        channel_id=CHANNEL,
        guild_id=GUILD,
        reply_to=reply_to["d"] if reply_to else None,
    )


async def record(sessions: SessionFactory, frame: Frame) -> MessageCreate:
    """What steps 1-3 of a turn leave behind: the frame recorded as the webhook records it
    (with who and what it is about) and the channel-log row."""
    event = parse_dispatch(frame)
    assert isinstance(event, Event) and isinstance(event.data, MessageCreate)
    async with unit_of_work(sessions) as session:
        session.add(
            InboxEvent(
                id=event.dedupe_id,
                event_type="MESSAGE_CREATE",
                payload=frame,
                author_id=event.author_id,
                channel_id=event.data.channel_id,
                message_id=event.message_id,
            )
        )
        await channel_log.log_message(session, event.data)
    return event.data


def episode(content: str, sources: list[int] | None, channel_id: int = CHANNEL) -> Episode:
    return Episode(channel_id=channel_id, content=content, source_user_ids=sources)


async def seed_world(env: MemoryEnv) -> dict[str, int]:
    s = env.sessions
    bread_said = said(1001, "I bake sourdough every Sunday")
    await record(s, bread_said)
    await record(s, said(1002, "My quokka is called Pip"))
    await record(s, said(1003, "Look at my stamps", by=BOB, reply_to=bread_said))
    await record(s, said(1004, f"ask <@{ALICE}> about it", by=BOB))
    extracted = Why(Actor.EXTRACTION, "write path")
    async with unit_of_work(s) as session:
        bread = (
            await store.add(
                session, ALICE, "Bakes sourdough on Sundays", extracted, learned_in=None
            )
        ).id
    pet = await add_memory(s, ALICE, "Owns a quokka called Pip")
    async with unit_of_work(s) as session:
        stamps = (await store.add(session, BOB, "Collects stamps", extracted, learned_in=None)).id
        await store.recent(session, ALICE, Why(Actor.REPLY, "recall"))
        session.add_all(
            [
                Observation(
                    channel_id=CHANNEL,
                    user_id=ALICE,
                    kind="message",
                    message_id=1001,
                    content="I bake sourdough every Sunday",
                ),
                Observation(
                    channel_id=CHANNEL,
                    user_id=BOB,
                    kind="message",
                    message_id=1003,
                    content="Look at my stamps",
                ),
                Signal(
                    message_id=BOT_MESSAGE,
                    user_id=ALICE,
                    kind="correction",
                    value="no, a quokka, not a koala",
                ),
                Signal(message_id=BOT_MESSAGE, user_id=ALICE, kind="reaction", value="👍"),
                Signal(message_id=BOT_MESSAGE, user_id=BOB, kind="reaction", value="🎉"),
                # Made from her words (recorded), or made before provenance in a channel she
                # spoke in and naming her by her username (distinctive, hers alone): both go.
                episode("Alice told everyone about her bread.", [ALICE, BOB]),
                episode("Some early summary of alice_w's quokka photos.", None),
                # Made from Bob's words alone, though it names her: judged by its inputs, it
                # stays. An early one of her channel naming no one of hers stays too.
                episode("alice_w was mentioned in passing.", [BOB]),
                episode("An early summary of the bake sale.", None),
                # Bob's alone, naming someone "malice": stays; one mentioning her by id
                # stays with the mention replaced; a legacy one elsewhere stays.
                episode("Bob showed stamps; a talk on italics and malice.", [BOB]),
                episode(f"Bob waved at <@{ALICE}>.", [BOB]),
                episode("Bob went fishing.", None, channel_id=501),
                # Task sessions: one stored before authors were recorded, where she spoke.
                AgentSession(
                    channel_id=CHANNEL,
                    history={"turns": [[{"role": "user", "content": "Alice: sourdough tips"}]]},
                ),
                AgentSession(
                    channel_id=501,
                    history={"turns": [[{"role": "user", "content": "Bob: fishing spots"}]]},
                ),
                # A channel persona she wrote as staff (her words), and one Bob wrote.
                Channel(
                    id=777,
                    guild_id=1,
                    persona="Talk like a sourdough baker",
                    persona_by=ALICE,
                    settings_by=ALICE,
                ),
                Channel(
                    id=778,
                    guild_id=1,
                    mode="free",
                    persona="Be brief",
                    persona_by=BOB,
                    settings_by=BOB,
                ),
            ]
        )
    # An earlier `!memory forget`: the ledger holds the forgotten text in its before state.
    await memory_forget(env.services, *text_command(env.services, ALICE, CHANNEL, None, 1005), pet)
    return {"bread": bread, "pet": pet, "stamps": stamps}


async def every_row_as_text(sessions: SessionFactory) -> dict[str, list[str]]:
    """Every row of every table, as JSON text (new tables are covered automatically)."""
    out: dict[str, list[str]] = {}
    async with sessions() as session:
        for table in Base.metadata.sorted_tables:
            rows = await session.execute(text(f'SELECT row_to_json(t)::text FROM "{table.name}" t'))
            out[table.name] = [row[0] for row in rows]
    return out


async def forget(env: MemoryEnv, message_id: int = 1009) -> register.ErasureRecord:
    """`!forgetme` as the turn runs it, then the worker's job to the end."""
    message = await record(env.sessions, said(message_id, "!forgetme"))
    await handle_command(env.services, ForgetMe(), *as_typed(env.services, message))
    async with env.sessions() as session:
        erasure_id = await session.scalar(text("SELECT max(id) FROM erasures"))
    assert erasure_id is not None
    while (done := await run_erasure(env.services, erasure_id)) is not None:
        if done.status is not register.Status.RUNNING:
            return done
    raise AssertionError("the erasure job did not run")


async def tables_holding_secrets(sessions: SessionFactory) -> set[str]:
    return {
        table
        for table, rows in (await every_row_as_text(sessions)).items()
        for row in rows
        if any(secret in row.lower() for secret in SECRETS)
    }


async def count(sessions: SessionFactory, model: type[Base], where: ColumnElement[bool]) -> int:
    async with sessions() as session:
        total = await session.scalar(select(func.count()).select_from(model).where(where))
        return int(total or 0)


async def test_mem09_no_trace_of_the_users_words_remains_in_any_table(env: MemoryEnv) -> None:
    await seed_world(env)
    # The scenario really put the words in every place they can live.
    assert await tables_holding_secrets(env.sessions) == {
        "memories",
        "messages",
        "memory_log",
        "observations",
        "signals",
        "episodes",
        "inbox",
        "agent_sessions",
        "channels",
    }

    await forget(env)

    assert await tables_holding_secrets(env.sessions) == set()
    assert await count(env.sessions, Memory, Memory.user_id == ALICE) == 0
    assert await count(env.sessions, Message, Message.author_id == ALICE) == 0
    assert await count(env.sessions, Observation, Observation.user_id == ALICE) == 0
    assert await count(env.sessions, Signal, Signal.user_id == ALICE) == 0


async def test_mem09_other_peoples_rows_are_untouched_but_for_mentions_of_her_id(
    env: MemoryEnv,
) -> None:
    ids = await seed_world(env)
    bobs_ledger = [
        (r.id, r.before, r.after) for r in await ledger_rows(env.sessions) if r.user_id == BOB
    ]

    await forget(env)

    assert await memories_of(env.sessions, BOB) == {ids["stamps"]: "Collects stamps"}
    async with env.sessions() as session:
        texts = {m.id: m.content for m in await session.scalars(select(Message))}
        observations = list(await session.scalars(select(Observation.content)))
        signals = list(await session.scalars(select(Signal.value)))
        episodes = sorted(await session.scalars(select(Episode.content)))
        sessions_left = list(await session.scalars(select(AgentSession.channel_id)))
        bobs_frame = await session.get(InboxEvent, "1003")
    assert texts == {1003: "Look at my stamps", 1004: f"ask {MENTION_TOKEN} about it"}
    assert observations == ["Look at my stamps"]
    assert signals == ["🎉"]
    assert episodes == [
        "An early summary of the bake sale.",
        "Bob showed stamps; a talk on italics and malice.",
        f"Bob waved at {MENTION_TOKEN}.",
        "Bob went fishing.",
        "alice_w was mentioned in passing.",
    ]
    assert sessions_left == [501]
    async with env.sessions() as session:
        rows = await session.execute(select(Channel.id, Channel.persona))
        personas = dict(rows.tuples().all())
    assert personas == {777: None, 778: "Be brief"}
    # His reply stays his; the quote of her message keeps only its ids.
    assert bobs_frame is not None and bobs_frame.payload["d"]["content"] == "Look at my stamps"
    quote = {"id": "1001", "channel_id": str(CHANNEL)}
    assert bobs_frame.payload["d"]["referenced_message"] == quote
    assert [
        (r.id, r.before, r.after) for r in await ledger_rows(env.sessions) if r.user_id == BOB
    ] == bobs_ledger


async def test_mem09_ledger_keeps_that_an_erasure_happened_not_what(env: MemoryEnv) -> None:
    ids = await seed_world(env)

    done = await forget(env)

    rows = [r for r in await ledger_rows(env.sessions) if r.user_id == ALICE]
    shape = [(r.actor, r.action, r.memory_id, r.before, r.after) for r in rows]
    redacted = {"redacted": True}
    assert done.receipt is not None
    assert shape == [
        ("extraction", "add", ids["bread"], None, redacted),
        ("reply", "read", None, None, [ids["pet"], ids["bread"]]),
        ("command", "delete", ids["pet"], redacted, None),
        ("forgetme", "delete", ids["bread"], redacted, None),
        ("forgetme", "delete", None, None, done.receipt),
    ]
    assert done.receipt == {
        "memories": 1,
        "ledger_rows_redacted": 2,
        "messages": 3,  # her two and the `!forgetme` itself
        "dm_messages": 0,
        "replies_blanked": 0,
        "frames_redacted": 3,
        "events_closed": 2,  # her two frames were recorded but never run: never will be
        "step_records": 1,  # the command's own record
        "observations": 1,
        "signals": 2,
        "episodes": 2,
        "diaries_blanked": 0,
        "style_revisions": 0,
        "task_turns": 1,
        "nightly_summaries": 0,
        "pins": 0,
        "channel_personas": 1,
        "thread_names": 0,
        "tombstones": 0,
        "mentions_replaced": 2,  # Bob's message and his episode
        "usage_rows": 0,  # no worker ran here to meter the calls
        "ledger_read_counts": 0,  # nothing was rolled up
        "tokens_kept": 0,  # nothing metered today
        "tasks_kept": 0,
    }
    assert all(r.created_at is not None for r in rows)


async def test_mem09_answers_at_once_then_dms_a_receipt_of_counts_only(env: MemoryEnv) -> None:
    await seed_world(env)
    env.discord.clear()

    await forget(env)

    [started] = env.discord.texts_in(CHANNEL)
    assert started == STARTED
    [posted] = env.discord.messages_in(CHANNEL)
    assert posted["message_reference"]["message_id"] == "1009"
    receipt = "\n".join(m["content"] for m in env.discord.dms_to(ALICE))
    assert "1 memory" in receipt and "3 messages" in receipt and "1 observation" in receipt
    assert "2 reactions/corrections" in receipt and "2 channel summaries" in receipt
    assert not any(secret in receipt.lower() for secret in SECRETS)


async def test_mem09_with_dms_closed_the_channel_hears_it_is_done_and_nothing_else(
    env: MemoryEnv,
) -> None:
    await seed_world(env)
    env.discord.dm_closed.add(ALICE)
    env.discord.clear()

    await forget(env)

    started, notice = env.discord.texts_in(CHANNEL)
    assert started == STARTED and "couldn't send the receipt" in notice
    assert not any(ch.isdigit() for ch in notice)  # no counts repeated in public


async def test_mem09_a_nightly_rollback_cannot_bring_erased_memories_back(env: MemoryEnv) -> None:
    await add_memory(env.sessions, ALICE, "Bakes sourdough on Sundays", age_days=400)
    async with unit_of_work(env.sessions) as session:
        run = NightlyRun(day=date(2026, 11, 29), status="finished", summary={})
        session.add(run)
        await session.flush()
        run_id = run.id
        await purge_expired(session, retention_days=180, run_id=run_id, now=datetime.now(UTC))

    await forget(env)
    result = await rollback_run(env.sessions, run_id, dry_run=False)

    assert result.plan.reinserted == [] and len(result.plan.skipped) == 1
    assert await memories_of(env.sessions, ALICE) == {}


async def test_mem09_someone_with_nothing_stored_gets_a_zero_receipt_and_a_ledger_entry(
    env: MemoryEnv,
) -> None:
    done = await forget(env)

    assert done.receipt is not None and done.receipt["memories"] == 0
    assert done.receipt["messages"] == 1  # the command itself
    [row] = await ledger_rows(env.sessions)
    assert (row.actor, row.action, row.memory_id) == ("forgetme", "delete", None)
    assert row.after == done.receipt


def test_mem09_receipt_text_has_counts_and_plurals_only() -> None:
    receipt = format_receipt({"memories": 2, "messages": 1, "signals": 1})
    assert "2 memories, 1 message (and 0 messages of our DMs), 0 observations" in receipt
    assert "1 reaction/correction" in receipt and "0 channel summaries" in receipt


async def test_mem09_writers_see_an_erasure_that_began_after_they_did(env: MemoryEnv) -> None:
    async with env.sessions() as session:
        before = await session.scalar(select(func.now()))
    assert before is not None
    async with unit_of_work(env.sessions) as session:
        erasure, started = await register.start(
            session, ALICE, requested_by=register.RequestedBy.ADMIN
        )
    assert started

    async with unit_of_work(env.sessions) as session:
        # Running: nothing may be written about her, whenever the writer began.
        assert await register.blocked(session, [ALICE, BOB], since=before) == {ALICE}
        assert await register.blocked(session, [ALICE], since=None) == {ALICE}
        await register.finish(session, erasure.id, {})
    async with unit_of_work(env.sessions) as session:
        # Done: only work that began before it is stopped; what she says later is new.
        assert await register.blocked(session, [ALICE], since=before) == {ALICE}
        later = datetime.now(UTC) + timedelta(minutes=1)
        assert await register.blocked(session, [ALICE], since=later) == set()


async def test_mem09_a_writer_that_waited_on_the_guard_sees_the_erasure_that_held_it(
    env: MemoryEnv,
) -> None:
    """An erasure holds the guard exclusively from before its row is written until its
    commit. A writer that asked ``blocked`` meanwhile waits on the lock, then reads the
    register as it is after that commit: it sees her erasure and writes nothing."""
    async with unit_of_work(env.sessions) as erasing:
        await register.start(erasing, ALICE, requested_by=register.RequestedBy.ADMIN)

        async def writer() -> set[int]:
            async with unit_of_work(env.sessions) as session:
                return await register.blocked(session, [ALICE, BOB], since=None)

        asking = asyncio.create_task(writer())
        await wait_until(
            lambda: someone_awaits_an_advisory_lock(env.sessions),
            within=10,
            what="the writer waiting on her guard",
        )
        assert not asking.done()
    assert await asking == {ALICE}


async def test_mem09_a_retried_command_joins_its_erasure_instead_of_starting_another(
    env: MemoryEnv,
) -> None:
    async with unit_of_work(env.sessions) as session:
        first, started = await register.start(
            session, ALICE, requested_by=register.RequestedBy.FORGETME, command_event_id="77"
        )
        again, started_again = await register.start(
            session, ALICE, requested_by=register.RequestedBy.FORGETME, command_event_id="77"
        )
        admin, by_admin = await register.start(
            session, ALICE, requested_by=register.RequestedBy.ADMIN
        )
    assert started and not started_again and not by_admin
    assert first.id == again.id == admin.id
    assert json.dumps(first.progress) == "{}"
