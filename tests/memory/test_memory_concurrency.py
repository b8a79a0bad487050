"""Two write paths for one person at once, and the same trigger run twice: the profile stays
consistent and the ledger replays exactly to what is stored."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest

from app.chat.fake import Text
from app.config import Settings
from app.db import SessionFactory
from app.decision.vocabulary import Question
from app.memory.write_path import run_write_path
from app.models.memory import MemoryLog
from app.vocabulary import Actor
from tests.support.memory_env import (
    MemoryEnv,
    all_memories,
    exchange,
    fact,
    ledger_rows,
    memory_env,
    snapshot,
    writer_request_text,
)

ALICE = 11


@pytest.fixture
async def env(settings: Settings, sessions: SessionFactory) -> AsyncIterator[MemoryEnv]:
    async with memory_env(settings, sessions) as world:
        yield world


def replay(rows: list[MemoryLog]) -> dict[int, str]:
    """Rebuild the profile from the ledger alone, asserting every step was legal."""
    state: dict[int, str] = {}
    for row in rows:
        if row.action not in ("add", "update", "delete"):
            continue  # reads change nothing
        assert row.memory_id is not None, row.id
        if row.action == "add":
            assert row.memory_id not in state
            state[row.memory_id] = snapshot(row.after)["content"]
        elif row.action == "update":
            assert state.get(row.memory_id) == snapshot(row.before)["content"], row.id
            state[row.memory_id] = snapshot(row.after)["content"]
        elif row.action == "delete":
            assert state.get(row.memory_id) == snapshot(row.before)["content"], row.id
            del state[row.memory_id]
    return state


def numbered_writer() -> Any:
    """Each writer call returns a distinct fact, so every update is visible in the ledger."""
    count = 0

    def respond(body: dict[str, Any]) -> Text:
        nonlocal count
        count += 1
        kind = "rewrite" if "Rewrite this note" in writer_request_text(body) else "new"
        return Text(fact(f"Alice fact {kind} {count}."))

    return respond


async def seed_profile(env: MemoryEnv) -> None:
    """Two memories made through the write path itself, so the ledger holds their adds."""
    env.jev.answers[Question.WORTH_KEEPING] = 0.9
    env.jev.answers[Question.ADD_MEMORY] = 0.9
    env.jev.answers[Question.MEMORY_VERDICT] = "keep"
    env.model.responder = numbered_writer()
    for said in ("I have a cat", "I live in Kyoto"):
        await run_write_path(env.services, exchange(ALICE, "Alice", said), actor=Actor.EXTRACTION)


async def test_two_runs_for_one_person_at_once_leave_a_consistent_profile(
    env: MemoryEnv,
) -> None:
    await seed_profile(env)
    first, second = (m.id for m in await all_memories(env.sessions))
    env.jev.answers[Question.MEMORY_VERDICT] = lambda body: (
        "delete" if "new 1." in body["prompt"] else "update"
    )

    outcomes = await asyncio.gather(
        run_write_path(
            env.services, exchange(ALICE, "Alice", "no more cat"), actor=Actor.EXTRACTION
        ),
        run_write_path(
            env.services, exchange(ALICE, "Alice", "moved again"), actor=Actor.EXTRACTION
        ),
    )

    rows = await ledger_rows(env.sessions)
    stored = {m.id: m.content for m in await all_memories(env.sessions)}
    assert replay(rows) == stored
    assert first not in stored
    assert [r.memory_id for r in rows if r.action == "delete"] == [first]
    assert sum(len(o.deleted) for o in outcomes) == 1
    assert second in stored and stored[second].startswith("Alice fact rewrite")
    assert sum(len(o.added) for o in outcomes) == 2
    assert {m.user_id for m in await all_memories(env.sessions)} == {ALICE}


async def test_the_same_trigger_twice_changes_nothing_the_second_time(env: MemoryEnv) -> None:
    env.jev.answers[Question.WORTH_KEEPING] = 0.9
    env.model.responder = numbered_writer()
    said = exchange(ALICE, "Alice", "I started running")

    first = await run_write_path(env.services, said, actor=Actor.EXTRACTION, trigger="reply:42")
    asked_before = len(env.jev.requests)
    rows_before = await ledger_rows(env.sessions)
    second = await run_write_path(env.services, said, actor=Actor.EXTRACTION, trigger="reply:42")

    assert len(first.added) == 1
    assert second.stopped == "already_applied" and not second.changed
    assert len(env.jev.requests) == asked_before
    assert [r.id for r in await ledger_rows(env.sessions)] == [r.id for r in rows_before]
    assert {r.trigger for r in rows_before} == {"reply:42"}
    assert len(await all_memories(env.sessions)) == 1


async def test_the_same_trigger_run_concurrently_applies_once(env: MemoryEnv) -> None:
    env.jev.answers[Question.WORTH_KEEPING] = 0.9
    env.model.responder = numbered_writer()
    said = exchange(ALICE, "Alice", "I started running")

    outcomes = await asyncio.gather(
        *(
            run_write_path(env.services, said, actor=Actor.EXTRACTION, trigger="reply:43")
            for _ in range(2)
        )
    )

    # The later run stops at the trigger's record, or (when it read the first run's memory)
    # finds its text already there and drops the add as a duplicate: either way, once.
    assert sorted(o.stopped or "" for o in outcomes) in (["", "already_applied"], ["", ""])
    assert sum(len(o.added) for o in outcomes) == 1
    assert len(await all_memories(env.sessions)) == 1
    assert [r.action for r in await ledger_rows(env.sessions)].count("add") == 1
