"""MEM-09 `!forgetme`: every trace of the person's words is gone from every table, other
people's data is untouched, the ledger keeps only that an erasure happened, with counts."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, date, datetime, timedelta

import pytest
from sqlalchemy import ColumnElement, func, select, text

from app.channel import log as channel_log
from app.commands.dispatch import handle_command
from app.commands.memory import Asker, memory_forget
from app.commands.parser import ForgetMe
from app.config import Settings
from app.db import SessionFactory, unit_of_work
from app.inbound.frames import MessageCreate
from app.memory import store
from app.memory.records import Why
from app.memory.rollback import rollback_run
from app.models import Base
from app.models.agent import AgentSession
from app.models.inbox import InboxEvent
from app.models.memory import Memory
from app.models.messages import Message
from app.models.nightly import NightlyRun
from app.models.signals import Signal
from app.models.structured import Episode, Observation
from app.privacy.erasure import (
    ACTOR,
    Receipt,
    format_receipt,
)
from app.privacy.traces import erasure_names, mentions_any
from app.structured.retention import purge_expired
from tests.support.memory_env import MemoryEnv, add_memory, ledger_rows, memories_of, memory_env
from tests.support.staff_env import CHANNEL, chat_message, frame_data

ALICE, BOB, BOT_MESSAGE = 42, 43, 2000
SECRETS = ("sourdough", "quokka", "sunday")


@pytest.fixture
async def env(settings: Settings, sessions: SessionFactory) -> AsyncIterator[MemoryEnv]:
    async with memory_env(settings, sessions) as env:
        yield env


def alice_says(id: int, content: str, **extra: object) -> MessageCreate:
    return chat_message(
        id=id, author_id=ALICE, content=content, username="alice_w", nick="Alice", **extra
    )


async def log_event(
    sessions: SessionFactory, message: MessageCreate, data: dict[str, object]
) -> None:
    """What steps 1-3 of a turn leave behind: the inbox frame and the channel-log row."""
    async with unit_of_work(sessions) as session:
        session.add(
            InboxEvent(
                id=str(message.id),
                event_type="MESSAGE_CREATE",
                payload={"op": 0, "t": "MESSAGE_CREATE", "s": 1, "d": data},
            )
        )
        await channel_log.log_message(session, message)


async def say(sessions: SessionFactory, **kwargs: object) -> MessageCreate:
    data = frame_data(**kwargs)  # type: ignore[arg-type]
    message = MessageCreate.model_validate(data)
    await log_event(sessions, message, data)
    return message


async def seed_world(env: MemoryEnv) -> dict[str, int]:
    s = env.sessions
    await say(
        s,
        id=1001,
        author_id=ALICE,
        username="alice_w",
        nick="Alice",
        content="I bake sourdough every Sunday",
    )
    await say(
        s,
        id=1002,
        author_id=ALICE,
        username="alice_w",
        nick="Alice",
        content="My quokka is called Pip",
    )
    await say(
        s,
        id=1003,
        author_id=BOB,
        username="bob",
        content="Look at my stamps",
        reply_to=(1001, ALICE, "I bake sourdough every Sunday"),
    )
    extracted = Why("extraction", "write path")
    async with unit_of_work(s) as session:
        bread = (
            await store.add(
                session, ALICE, "Bakes sourdough on Sundays", extracted, learned_in=None
            )
        ).id
    pet = await add_memory(s, ALICE, "Owns a quokka called Pip")
    async with unit_of_work(s) as session:
        stamps = (await store.add(session, BOB, "Collects stamps", extracted, learned_in=None)).id
        await store.recent(session, ALICE, Why("reply", "recall"))
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
                Episode(channel_id=CHANNEL, content="Alice told everyone about her bread."),
                Episode(channel_id=CHANNEL, content="alice_w shared quokka photos."),
                Episode(channel_id=CHANNEL, content=f"<@{ALICE}> joined the Sunday baking club."),
                Episode(
                    channel_id=CHANNEL, content="Bob showed stamps; a talk on italics and malice."
                ),
                Episode(channel_id=501, content="Bob went fishing."),
                # A task session quoting the channel, as the agent stores it.
                AgentSession(
                    channel_id=CHANNEL,
                    history={"turns": [{"role": "user", "content": "Alice: find sourdough tips"}]},
                ),
                AgentSession(
                    channel_id=501,
                    history={"turns": [{"role": "user", "content": "Bob: fishing spots"}]},
                ),
            ]
        )
    # An earlier `!memory forget`: the ledger holds the forgotten text in its before state.
    await memory_forget(env.services, Asker(ALICE, CHANNEL, None, 1004), pet)
    return {"bread": bread, "pet": pet, "stamps": stamps}


async def every_row_as_text(sessions: SessionFactory) -> dict[str, list[str]]:
    """Every row of every table, as JSON text (new tables are covered automatically)."""
    out: dict[str, list[str]] = {}
    async with sessions() as session:
        for table in Base.metadata.sorted_tables:
            rows = await session.execute(text(f'SELECT row_to_json(t)::text FROM "{table.name}" t'))
            out[table.name] = [row[0] for row in rows]
    return out


async def forget(env: MemoryEnv, message_id: int = 1009) -> MessageCreate:
    message = alice_says(message_id, "!forgetme")
    await log_event(
        env.sessions,
        message,
        frame_data(
            id=message_id, author_id=ALICE, content="!forgetme", username="alice_w", nick="Alice"
        ),
    )
    await handle_command(env.services, ForgetMe(), message, str(message.id))
    return message


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
    }

    await forget(env)

    assert await tables_holding_secrets(env.sessions) == set()
    assert await count(env.sessions, Memory, Memory.user_id == ALICE) == 0
    assert await count(env.sessions, Message, Message.author_id == ALICE) == 0
    assert await count(env.sessions, Observation, Observation.user_id == ALICE) == 0
    assert await count(env.sessions, Signal, Signal.user_id == ALICE) == 0


async def test_mem09_other_users_data_is_untouched(env: MemoryEnv) -> None:
    ids = await seed_world(env)
    bobs_ledger = [
        (r.id, r.before, r.after) for r in await ledger_rows(env.sessions) if r.user_id == BOB
    ]

    await forget(env)

    assert await memories_of(env.sessions, BOB) == {ids["stamps"]: "Collects stamps"}
    async with env.sessions() as session:
        message = await session.get(Message, 1003)
        assert message is not None and message.content == "Look at my stamps"
        observations = list(await session.scalars(select(Observation.content)))
        signals = list(await session.scalars(select(Signal.value)))
        episodes = sorted(await session.scalars(select(Episode.content)))
    assert observations == ["Look at my stamps"]
    assert signals == ["🎉"]
    assert episodes == ["Bob showed stamps; a talk on italics and malice.", "Bob went fishing."]
    assert [
        (r.id, r.before, r.after) for r in await ledger_rows(env.sessions) if r.user_id == BOB
    ] == bobs_ledger


async def test_mem09_ledger_keeps_that_an_erasure_happened_not_what(env: MemoryEnv) -> None:
    ids = await seed_world(env)

    await forget(env)

    rows = [r for r in await ledger_rows(env.sessions) if r.user_id == ALICE]
    shape = [(r.actor, r.action, r.memory_id, r.before, r.after) for r in rows]
    redacted = {"redacted": True}
    assert shape == [
        ("extraction", "add", ids["bread"], None, redacted),
        ("reply", "read", None, None, [ids["pet"], ids["bread"]]),
        ("command", "delete", ids["pet"], redacted, None),
        ("forgetme", "delete", ids["bread"], redacted, None),
        (
            "forgetme",
            "delete",
            None,
            None,
            {
                "memories": 1,
                "messages": 3,
                "dm_messages": 0,
                "replies_blanked": 0,
                "mentions_removed": 0,
                "observations": 1,
                "signals": 2,
                "episodes": 3,
                "ledger_rows_redacted": 2,
                "others_memories_rewritten": 0,
                # Her two frames, Bob's reply quoting her, and the `!forgetme` frame itself
                # (its names taken out, its command kept for a retried job).
                "events_redacted": 4,
                # Her two frames were recorded but never run: closed, so they never will be.
                "events_closed": 2,
                "step_records": 0,
                "diaries_blanked": 0,
                "style_revisions_reverted": 0,
                "agent_sessions": 1,
                "pins_rewritten": 0,
            },
        ),
    ]
    assert all(r.created_at is not None for r in rows)


async def test_mem09_answers_with_a_receipt_of_counts_only(env: MemoryEnv) -> None:
    await seed_world(env)
    env.discord.clear()

    await forget(env)

    [receipt] = env.discord.texts_in(CHANNEL)
    assert "1 memory" in receipt and "3 messages" in receipt and "1 observation" in receipt
    assert "2 reactions/corrections" in receipt and "3 channel summaries" in receipt
    assert not any(secret in receipt.lower() for secret in SECRETS)
    [posted] = env.discord.messages_in(CHANNEL)
    assert posted["message_reference"]["message_id"] == "1009"


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
    await forget(env)

    [receipt] = env.discord.texts_in(CHANNEL)
    assert "0 memories" in receipt and "1 message" in receipt  # the command itself
    [row] = await ledger_rows(env.sessions)
    assert (row.actor, row.action, row.memory_id) == ("forgetme", "delete", None)
    assert row.after is not None and row.after["memories"] == 0


def test_mem09_names_match_as_words_ascii_and_anywhere_otherwise() -> None:
    names = erasure_names(ALICE, ["Al", "たろう", "x", None, "  "])
    assert names == ["<@!42>", "<@42>", "Al", "たろう"]
    assert mentions_any("al said hi", names)
    assert mentions_any("Thanks, AL!", names)
    assert not mentions_any("also, alpine malt", names)
    assert mentions_any("今日はたろうさんが来た", names)
    assert mentions_any("ping <@!42> please", names)
    assert not mentions_any("x marks the spot", names)  # one-letter names are ignored


def test_mem09_receipt_text_has_counts_and_plurals_only() -> None:
    receipt = format_receipt(Receipt(memories=2, messages=1, signals=1))
    assert "2 memories, 1 message, 0 observations, 1 reaction/correction" in receipt
    assert "0 channel summaries" in receipt


async def test_mem09_writers_can_tell_an_erasure_happened_after_they_read(env: MemoryEnv) -> None:
    async with env.sessions() as session:
        read_at = await session.scalar(select(func.now()))
    assert read_at is not None

    await forget(env)

    async with env.sessions() as session:
        assert await store.erased_since(session, ALICE, read_at, ACTOR)
        assert not await store.erased_since(session, BOB, read_at, ACTOR)
        later = datetime.now(UTC) + timedelta(minutes=1)
        assert not await store.erased_since(session, ALICE, later, ACTOR)
