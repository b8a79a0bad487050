"""The memory write path on real Postgres, with FakeJev and FakeAnthropic served over HTTP
and reached through the real HttpDecider and AnthropicChat: every branch of the seven steps."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from typing import Any

import pytest

from app.chat.fake import Failure, Text
from app.commands.memory import memory_forget
from app.config import Settings
from app.db import SessionFactory
from app.decision.fake import Raw
from app.decision.vocabulary import Question
from app.kit.attribution import read_lines
from app.memory.write_path import run_write_path
from app.vocabulary import Actor
from tests.support.commands import text_command
from tests.support.memory_env import (
    MemoryEnv,
    add_memory,
    all_memories,
    exchange,
    fact,
    ledger_rows,
    memories_of,
    memory_env,
    snapshot,
    writer_request_text,
)
from tests.support.providers import BOTH_PROVIDERS

pytestmark = BOTH_PROVIDERS

ALICE, BOB = 11, 22


@pytest.fixture
async def env(settings: Settings, sessions: SessionFactory) -> AsyncIterator[MemoryEnv]:
    async with memory_env(settings, sessions) as world:
        yield world


def alice_says(*said: str) -> Any:
    return exchange(ALICE, "Alice", *said)


async def test_unusable_exchange_asks_nothing_and_writes_nothing(env: MemoryEnv) -> None:
    bot_only = exchange(ALICE, "Alice")  # only the bot spoke

    outcome = await run_write_path(env.services, bot_only, actor=Actor.EXTRACTION)

    assert outcome.stopped == "unusable"
    assert env.jev.requests == []
    assert await ledger_rows(env.sessions) == []


async def test_not_worth_keeping_stops_before_any_read_or_write(env: MemoryEnv) -> None:
    await add_memory(env.sessions, ALICE, "Alice likes tea.")
    env.jev.answers[Question.WORTH_KEEPING] = 0.49

    outcome = await run_write_path(env.services, alice_says("lol ok"), actor=Actor.EXTRACTION)

    assert outcome.stopped == "not_worth_keeping"
    assert [r["question"] for r in env.jev.requests] == ["worth_keeping"]
    assert env.model.requests == []
    assert await ledger_rows(env.sessions) == []
    assert await memories_of(env.sessions, ALICE) == {1: "Alice likes tea."}


async def test_no_answer_to_worth_keeping_is_the_same_as_no(env: MemoryEnv) -> None:
    await add_memory(env.sessions, ALICE, "Alice likes tea.")
    env.jev.answers[Question.WORTH_KEEPING] = Raw(502, {"detail": "model failed"})

    outcome = await run_write_path(
        env.services, alice_says("I moved to Osaka"), actor=Actor.EXTRACTION
    )

    assert outcome.stopped == "no_answer"
    assert env.model.requests == []
    assert await ledger_rows(env.sessions) == []
    assert await memories_of(env.sessions, ALICE) == {1: "Alice likes tea."}


async def test_decision_service_down_writes_nothing(env: MemoryEnv) -> None:
    await add_memory(env.sessions, ALICE, "Alice likes tea.")
    env.jev.down = True
    env.model.default = Text(fact("Alice moved to Osaka."))

    outcome = await run_write_path(
        env.services, alice_says("I moved to Osaka"), actor=Actor.EXTRACTION
    )

    assert not outcome.changed
    assert env.model.requests == []
    assert await ledger_rows(env.sessions) == []
    assert await memories_of(env.sessions, ALICE) == {1: "Alice likes tea."}


async def test_first_memory_is_added_without_asking_add_memory(env: MemoryEnv) -> None:
    env.jev.answers[Question.WORTH_KEEPING] = 0.9
    env.model.default = Text(fact("Alice is learning the cello."))

    outcome = await run_write_path(
        env.services, alice_says("I started cello lessons this week!"), actor=Actor.EXTRACTION
    )

    assert env.jev.asked(Question.ADD_MEMORY) == []
    assert env.jev.asked(Question.MEMORY_VERDICT) == []
    [memory] = await all_memories(env.sessions)
    assert (memory.user_id, memory.content, memory.source) == (
        ALICE,
        "Alice is learning the cello.",
        "self",
    )
    assert outcome.added == [memory.id]
    read, add = await ledger_rows(env.sessions)
    assert (read.action, read.actor, read.user_id, read.memory_id, read.after) == (
        "read",
        "extraction",
        ALICE,
        None,
        [],
    )
    assert (add.action, add.actor, add.memory_id, add.before) == (
        "add",
        "extraction",
        memory.id,
        None,
    )
    assert snapshot(add.after)["content"] == "Alice is learning the cello."
    assert snapshot(add.after)["user_id"] == str(ALICE)
    assert add.reason  # every change says why (SPEC invariant 3)


async def test_keep_update_delete_verdicts_are_applied_with_before_and_after(
    env: MemoryEnv,
) -> None:
    keep = await add_memory(env.sessions, ALICE, "Alice has a cat called Miso.", age_days=3)
    update = await add_memory(env.sessions, ALICE, "Alice lives in Kyoto.", age_days=2)
    delete = await add_memory(env.sessions, ALICE, "Alice is job hunting.", age_days=1)
    env.jev.answers[Question.WORTH_KEEPING] = 0.8
    verdicts = {"Miso": "keep", "Kyoto": "update", "job hunting": "delete"}
    env.jev.answers[Question.MEMORY_VERDICT] = lambda body: next(
        v for k, v in verdicts.items() if k in body["prompt"]
    )
    env.jev.answers[Question.ADD_MEMORY] = 0.1
    env.model.default = Text(fact("Alice lives in Osaka now."))

    outcome = await run_write_path(
        env.services,
        alice_says("I moved to Osaka and got the job!"),
        actor=Actor.EXTRACTION,
    )

    assert (outcome.updated, outcome.deleted, outcome.added) == ([update], [delete], [])
    assert await memories_of(env.sessions, ALICE) == {
        keep: "Alice has a cat called Miso.",
        update: "Alice lives in Osaka now.",
    }
    read, *changes = await ledger_rows(env.sessions)
    assert read.after == [delete, update, keep]  # most recently updated first
    by_action = {row.action: row for row in changes}
    assert set(by_action) == {"update", "delete"}
    assert snapshot(by_action["update"].before)["content"] == "Alice lives in Kyoto."
    assert snapshot(by_action["update"].after)["content"] == "Alice lives in Osaka now."
    assert snapshot(by_action["delete"].before)["content"] == "Alice is job hunting."
    assert by_action["delete"].after is None
    # The writer saw the exchange and the one record it rewrote, never the rest of the profile.
    [writer_call] = env.model.requests
    seen = writer_request_text(writer_call) + str(writer_call["system"])
    assert "Kyoto" in seen and "Miso" not in seen and "job hunting" not in seen


async def test_a_failed_verdict_leaves_that_record_untouched(env: MemoryEnv) -> None:
    failing = await add_memory(env.sessions, ALICE, "Alice drinks oolong.")
    other = await add_memory(env.sessions, ALICE, "Alice plays chess.")
    env.jev.answers[Question.WORTH_KEEPING] = 0.8
    env.jev.answers[Question.MEMORY_VERDICT] = lambda body: (
        Raw(504, {"detail": "timeout"}) if "oolong" in body["prompt"] else "delete"
    )
    env.jev.answers[Question.ADD_MEMORY] = 0.0

    outcome = await run_write_path(
        env.services, alice_says("I quit chess and coffee, all of it"), actor=Actor.EXTRACTION
    )

    assert outcome.deleted == [other]
    assert await memories_of(env.sessions, ALICE) == {failing: "Alice drinks oolong."}
    assert [r.memory_id for r in await ledger_rows(env.sessions) if r.action != "read"] == [other]


async def test_add_refused_changes_nothing_after_the_read(env: MemoryEnv) -> None:
    existing = await add_memory(env.sessions, ALICE, "Alice likes tea.")
    env.jev.answers[Question.WORTH_KEEPING] = 0.7
    env.jev.answers[Question.MEMORY_VERDICT] = "keep"
    env.jev.answers[Question.ADD_MEMORY] = 0.3

    outcome = await run_write_path(
        env.services, alice_says("I like jazz too"), actor=Actor.EXTRACTION
    )

    assert not outcome.changed
    assert env.model.requests == []
    [add_question] = env.jev.asked(Question.ADD_MEMORY)
    assert "[keep]" in add_question["prompt"] and "Alice likes tea." in add_question["prompt"]
    assert [r.action for r in await ledger_rows(env.sessions)] == ["read"]
    assert await memories_of(env.sessions, ALICE) == {existing: "Alice likes tea."}


async def test_add_allowed_by_jev_is_written_and_logged(env: MemoryEnv) -> None:
    await add_memory(env.sessions, ALICE, "Alice likes tea.")
    env.jev.answers[Question.WORTH_KEEPING] = 0.7
    env.jev.answers[Question.ADD_MEMORY] = 0.6  # verdict unset: FakeJev answers "keep"
    env.model.default = Text(fact("Alice likes jazz."))

    outcome = await run_write_path(env.services, alice_says("I love jazz"), actor=Actor.NIGHTLY)

    assert len(outcome.added) == 1
    assert sorted((await memories_of(env.sessions, ALICE)).values()) == [
        "Alice likes jazz.",
        "Alice likes tea.",
    ]
    assert len(env.jev.asked(Question.ADD_MEMORY)) == 1  # the decision that let it in
    add = (await ledger_rows(env.sessions))[-1]
    assert (add.action, add.actor, add.memory_id) == ("add", "nightly", outcome.added[0])
    assert add.reason


async def test_third_party_fact_is_discarded_logged_and_stored_nowhere(
    env: MemoryEnv, caplog: pytest.LogCaptureFixture
) -> None:
    env.jev.answers[Question.WORTH_KEEPING] = 0.9
    env.model.default = Text(fact("Bob is allergic to peanuts.", subject="other"))

    with caplog.at_level(logging.INFO, logger="app.memory.write_path"):
        outcome = await run_write_path(
            env.services, alice_says("Bob told me he's allergic to peanuts"), actor=Actor.EXTRACTION
        )

    assert outcome.discarded == ["Bob is allergic to peanuts."]
    assert outcome.added == []
    assert await all_memories(env.sessions) == []
    assert [r.action for r in await ledger_rows(env.sessions)] == ["read"]
    assert any(
        r.getMessage() == "memory text discarded" and getattr(r, "subject", None) == "other"
        for r in caplog.records
    )


@pytest.mark.parametrize(
    "reply",
    [
        Text('{"subject": "none", "fact": ""}'),
        Text("Alice likes tea."),  # not the JSON the writer was told to answer
        Text('{"subject": "speaker", "fact": "' + "x" * 400 + '"}'),
        Failure(500),
    ],
)
async def test_a_writer_without_a_usable_fact_adds_nothing(env: MemoryEnv, reply: Any) -> None:
    env.jev.answers[Question.WORTH_KEEPING] = 0.9
    env.model.default = reply

    outcome = await run_write_path(env.services, alice_says("hmm"), actor=Actor.EXTRACTION)

    assert outcome.added == []
    assert await all_memories(env.sessions) == []


async def test_writer_is_told_which_lines_are_the_bots_and_only_about_the_speaker(
    env: MemoryEnv,
) -> None:
    env.jev.answers[Question.WORTH_KEEPING] = 0.9
    env.model.default = Text(fact("Alice plans a trip to Iceland."))
    said = exchange(ALICE, "Alice", "I'm going to Iceland in May", bot_says="You love hiking!")

    await run_write_path(env.services, said, actor=Actor.EXTRACTION)

    [call] = env.model.requests
    request = writer_request_text(call)
    assert read_lines(request) == [
        {"from": "Alice", "line": 1, "speaker": True, "text": "I'm going to Iceland in May"},
        {"from": "companion", "bot": True, "line": 2, "text": "You love hiking!"},
    ]
    system = call["system"][0]["text"]
    assert "never take a fact from them" in system
    assert '"subject": "other"' in system


async def test_a_record_changed_during_the_model_call_is_skipped(env: MemoryEnv) -> None:
    """The user forgets the record while the writer is still phrasing its update: the lock is
    not held across the model call (the forget goes through), and the stale update is dropped."""
    target = await add_memory(env.sessions, ALICE, "Alice lives in Kyoto.")
    env.jev.answers[Question.WORTH_KEEPING] = 0.9
    env.jev.answers[Question.MEMORY_VERDICT] = "update"
    env.jev.answers[Question.ADD_MEMORY] = 0.0

    async def forget_meanwhile(body: dict[str, Any]) -> Text:
        await memory_forget(env.services, *text_command(env.services, ALICE, 5, None, 77), target)
        return Text(fact("Alice lives in Osaka."))

    env.model.responder = forget_meanwhile

    outcome = await run_write_path(
        env.services, alice_says("I moved to Osaka"), actor=Actor.EXTRACTION
    )

    assert outcome.skipped == [target] and outcome.updated == []
    assert await all_memories(env.sessions) == []
    actions = [(r.actor, r.action) for r in await ledger_rows(env.sessions)]
    assert actions == [("extraction", "read"), ("command", "delete")]


async def test_someone_elses_memories_are_never_read_or_touched(env: MemoryEnv) -> None:
    bobs = await add_memory(env.sessions, BOB, "Bob lives in Kyoto.")
    env.jev.answers[Question.WORTH_KEEPING] = 0.9
    env.jev.answers[Question.MEMORY_VERDICT] = "delete"
    env.model.default = Text(fact("Alice lives in Kyoto."))

    await run_write_path(env.services, alice_says("I live in Kyoto"), actor=Actor.EXTRACTION)

    assert env.jev.asked(Question.MEMORY_VERDICT) == []  # Alice had none; Bob's weren't read
    assert await memories_of(env.sessions, BOB) == {bobs: "Bob lives in Kyoto."}
    assert {r.user_id for r in await ledger_rows(env.sessions)} == {ALICE}
