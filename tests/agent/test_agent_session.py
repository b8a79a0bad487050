"""Per-channel sessions: trimming keeps whole turns; concurrent saves keep both turns."""

from __future__ import annotations

import asyncio

from sqlalchemy import select

from app.agent.store import (
    SessionLimits,
    SessionStore,
    StoredTurn,
    Turn,
    trim_stored,
    turn_size,
)
from app.db import SessionFactory
from app.models.agent import AgentSession


def tool_turn(n: int, result: str = "r") -> Turn:
    return [
        {"role": "user", "content": f"task {n}"},
        {"role": "assistant", "content": [{"type": "tool_use", "id": f"t{n}", "name": "x"}]},
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": f"t{n}", "content": result}],
        },
        {"role": "assistant", "content": [{"type": "text", "text": f"answer {n}"}]},
    ]


def trim_turns(turns: list[Turn], limits: SessionLimits) -> list[Turn]:
    """The kept turns' messages, for turns of unknown authorship."""
    return [t.messages for t in trim_stored([StoredTurn(t, None) for t in turns], limits)]


def test_only_the_newest_turns_are_kept() -> None:
    turns = [tool_turn(n) for n in range(10)]

    kept = trim_turns(turns, SessionLimits(max_turns=3, max_chars=100_000))

    assert kept == turns[-3:]


def test_character_budget_drops_whole_old_turns() -> None:
    turns = [tool_turn(n) for n in range(5)]
    budget = turn_size(turns[0]) * 2 + 10

    kept = trim_turns(turns, SessionLimits(max_turns=10, max_chars=budget))

    assert kept == turns[-2:]


def test_an_oversized_newest_turn_is_kept_as_request_and_answer() -> None:
    huge = tool_turn(1, result="x" * 5000)

    kept = trim_turns([tool_turn(0), huge], SessionLimits(max_turns=10, max_chars=1000))

    assert kept == [tool_turn(0), [huge[0], huge[-1]]]


async def test_concurrent_saves_keep_both_turns(sessions: SessionFactory) -> None:
    store = SessionStore(sessions)

    await asyncio.gather(store.append(5, tool_turn(1)), store.append(5, tool_turn(2)))

    loaded = await store.load(5)
    assert sorted(turn[0]["content"] for turn in loaded) == ["task 1", "task 2"]
    async with sessions() as db:
        row = await db.scalar(select(AgentSession).where(AgentSession.channel_id == 5))
    assert row is not None and len(row.history["turns"]) == 2


async def test_a_new_channel_has_no_history(sessions: SessionFactory) -> None:
    assert await SessionStore(sessions).load(6) == []
