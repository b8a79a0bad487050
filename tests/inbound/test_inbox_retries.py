"""No work silently lost: a failed event job is retried with backoff through a long outage,
a spent one is dead-lettered (visible, replayable), and the prune keeps the unfinished.

Through the real stack (webhook → worker → turn) with fakes on real ports; minutes of
backoff are simulated by moving the inbox's next attempt to now, never by sleeping."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import timedelta

import httpx
import pytest
from prometheus_client import REGISTRY
from sqlalchemy import func, select, text, update

from app.chat.fake import Failure, Text
from app.config import Settings
from app.db import SessionFactory, unit_of_work
from app.inbound.retries import LAST_ATTEMPT_LEASE, MAX_ATTEMPTS, retry_delay
from app.inbound.store import claim, prune_inbox, sweep_inbox
from app.kit.arqueue import create_queue
from app.models.inbox import CompletedStep, InboxEvent
from app.models.messages import Message
from app.turn.pipeline import APOLOGY
from tests.support.frames import message_create
from tests.support.inbox import db_now, enqueue_due_now, inbox_row, make_due, set_row
from tests.support.stack import BOT_ID, Stack, running_stack
from tests.support.worker import drain

MENTION = f"<@{BOT_ID}>"
ADMIN = {"Authorization": "Bearer test-admin-secret-8c2e4a6f1d3b5907"}
POST_TRIES = 4  # the Discord client's own attempts per call before the job fails
OUTAGE = timedelta(minutes=15)
S = timedelta(seconds=1)
MODEL_TEXT = "Hello from the model!"  # running_stack's model answer
OLD_GIVE_UP = 5  # attempts before this change marked an event handled and gave up


@pytest.fixture
async def stack(
    settings: Settings, sessions: SessionFactory, redis: object, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[Stack]:
    async with running_stack(settings, monkeypatch) as running:
        yield running


def sample(name: str) -> float:
    return REGISTRY.get_sample_value(name) or 0.0


async def test_a_fifteen_minute_discord_outage_loses_no_reply(
    stack: Stack, sessions: SessionFactory
) -> None:
    frame = message_create(content=f"{MENTION} are you there?")
    event_id = frame["d"]["id"]
    await stack.post(frame)  # the webhook enqueues the first attempt
    elapsed = timedelta()  # simulated time since the first attempt started
    failed = 0
    while elapsed < OUTAGE:  # Discord answers 503 to every post until the outage ends
        stack.discord.fail_next("POST /channels/300/messages", 503, count=POST_TRIES)
        before = await db_now(sessions)
        await drain(stack.settings)
        failed += 1
        row = await inbox_row(sessions, event_id)
        assert (row.attempts, row.handled_at, row.dead_at) == (failed, None, None)
        assert row.last_error == "DiscordUnavailable"
        pause = retry_delay(failed)
        assert pause is not None and row.next_attempt_at is not None
        assert before + pause <= row.next_attempt_at <= await db_now(sessions) + pause
        assert await enqueue_due_now(sessions, stack.settings.redis_url) == 0  # not yet due
        await make_due(sessions, event_id)
        elapsed += pause
        assert await enqueue_due_now(sessions, stack.settings.redis_url) == 1
    assert stack.replies() == []
    await drain(stack.settings)  # Discord is back

    assert failed > OLD_GIVE_UP and failed < MAX_ATTEMPTS
    [reply] = stack.replies()
    assert reply["content"] == "Hello from the model!"
    assert len(stack.discord.calls_to("POST", "/channels/300/messages")) == failed * POST_TRIES + 1
    assert len(stack.model.requests) == 1  # the text was fixed once, then re-posted
    assert len(stack.discord.reactions) == 1
    row = await inbox_row(sessions, event_id)
    assert row.handled_at is not None and row.dead_at is None and row.attempts == failed + 1


async def test_a_fifteen_minute_anthropic_outage_loses_no_reply(
    stack: Stack, sessions: SessionFactory
) -> None:
    frame = message_create(content=f"{MENTION} what should I cook tonight?")
    event_id = frame["d"]["id"]
    stack.model.default = Failure(529, retry_after=0.01)  # overloaded, through the SDK's retries
    await stack.post(frame)
    elapsed, failed = timedelta(), 0
    while elapsed < OUTAGE:
        await drain(stack.settings)
        failed += 1
        row = await inbox_row(sessions, event_id)
        assert (row.attempts, row.handled_at, row.dead_at) == (failed, None, None)
        assert row.last_error == "ChatUnavailable"
        pause = retry_delay(failed)
        assert pause is not None
        await make_due(sessions, event_id)
        elapsed += pause
        assert await enqueue_due_now(sessions, stack.settings.redis_url) == 1
    assert stack.replies() == []  # no apology while a retry may still answer
    stack.model.default = Text(MODEL_TEXT)
    await drain(stack.settings)  # Anthropic is back

    assert failed < MAX_ATTEMPTS
    [reply] = stack.replies()
    assert reply["content"] == MODEL_TEXT
    assert reply["message_reference"]["message_id"] == event_id
    assert len(stack.discord.reactions) == 1  # the acknowledgement came once, at the start
    row = await inbox_row(sessions, event_id)
    assert row.handled_at is not None and row.attempts == failed + 1


async def test_a_model_outage_through_the_last_attempt_gets_the_apology(
    stack: Stack, sessions: SessionFactory
) -> None:
    frame = message_create(content=f"{MENTION} still there?")
    event_id = frame["d"]["id"]
    stack.model.default = Failure(529, retry_after=0.01)
    await stack.post(frame)
    await drain(stack.settings)
    assert stack.replies() == []
    await set_row(sessions, event_id, attempts=MAX_ATTEMPTS - 1)  # the retries between failed
    await make_due(sessions, event_id)
    assert await enqueue_due_now(sessions, stack.settings.redis_url) == 1
    await drain(stack.settings)

    [reply] = stack.replies()
    assert reply["content"] == APOLOGY  # answered, never silently dropped
    row = await inbox_row(sessions, event_id)
    assert row.handled_at is not None and row.dead_at is None


async def test_the_last_attempt_failing_dead_letters_the_event_and_a_replay_answers(
    stack: Stack, sessions: SessionFactory
) -> None:
    frame = message_create(content=f"{MENTION} secret plans for the weekend")
    event_id = frame["d"]["id"]
    await stack.post(frame)
    await set_row(sessions, event_id, attempts=MAX_ATTEMPTS - 1)  # the earlier attempts failed
    stack.discord.fail_next("POST /channels/300/messages", 503, count=POST_TRIES)
    dead_before = sample("inbox_dead_lettered_total")
    await drain(stack.settings)

    row = await inbox_row(sessions, event_id)
    assert row.dead_at is not None and row.handled_at is None
    assert (row.attempts, row.last_error) == (MAX_ATTEMPTS, "DiscordUnavailable")
    assert sample("inbox_dead_lettered_total") == dead_before + 1
    # A dead letter is never retried on its own, however overdue its last schedule.
    await set_row(sessions, event_id, next_attempt_at=row.received_at)
    assert await enqueue_due_now(sessions, stack.settings.redis_url) == 0
    queue = create_queue(stack.settings.redis_url)
    try:
        assert await sweep_inbox(sessions, queue, grace_s=0) == 0  # not in the backlog
    finally:
        await queue.close()
    assert sample("inbox_dead_letters") == 1

    async with httpx.AsyncClient(base_url=stack.api, headers=ADMIN) as admin:
        listed = (await admin.get("/inbox/dead")).json()
        assert listed["total"] == 1
        [dead] = listed["events"]
        assert dead["id"] == event_id and dead["type"] == "MESSAGE_CREATE"
        assert (dead["attempts"], dead["lastError"]) == (MAX_ATTEMPTS, "DiscordUnavailable")
        assert set(dead) == {"id", "type", "receivedAt", "deadAt", "attempts", "lastError"}
        assert "secret plans" not in str(listed)

        replayed = await admin.post(f"/inbox/{event_id}/replay")
        assert replayed.status_code == 202
        assert replayed.json() == {"eventId": event_id, "queued": True}
        await drain(stack.settings)
        assert (await admin.get("/inbox/dead")).json() == {"events": [], "total": 0}
        again = await admin.post(f"/inbox/{event_id}/replay")
    assert again.status_code == 409  # handled now, not dead
    [reply] = stack.replies()
    assert reply["message_reference"]["message_id"] == event_id
    row = await inbox_row(sessions, event_id)
    assert row.handled_at is not None and row.dead_at is None and row.attempts == 1


async def test_after_forgetme_her_dead_letters_and_waiting_retries_never_run_again(
    stack: Stack, sessions: SessionFactory
) -> None:
    dead, waiting = (message_create(content=f"{MENTION} {text}") for text in ("dead", "waiting"))
    others = message_create(content=f"{MENTION} mine", author_id=2002, author_name="bob")
    for frame in (dead, waiting, others):
        await stack.post(frame)
    await set_row(sessions, dead["d"]["id"], attempts=MAX_ATTEMPTS - 1)
    stack.discord.fail_next("POST /channels/300/messages", 503, count=3 * POST_TRIES)
    await drain(stack.settings)  # her two fail (one dead now, one waiting), and so does his
    assert (await inbox_row(sessions, dead["d"]["id"])).dead_at is not None
    assert (await inbox_row(sessions, waiting["d"]["id"])).next_attempt_at is not None

    await stack.deliver(message_create(content="!forgetme"))

    async with httpx.AsyncClient(base_url=stack.api, headers=ADMIN) as admin:
        assert (await admin.get("/inbox/dead")).json() == {"events": [], "total": 0}
        assert (await admin.post(f"/inbox/{dead['d']['id']}/replay")).status_code == 409
    for frame in (dead, waiting):
        row = await inbox_row(sessions, frame["d"]["id"])
        assert row.handled_at is not None and row.dead_at is None
    still = await inbox_row(sessions, others["d"]["id"])  # another person's retry is untouched
    assert still.handled_at is None and still.next_attempt_at is not None
    await make_due(sessions, others["d"]["id"])
    assert await enqueue_due_now(sessions, stack.settings.redis_url) == 1  # only his
    await drain(stack.settings)
    async with sessions() as session:
        hers = select(func.count()).select_from(Message).where(Message.author_id == 2001)
        assert await session.scalar(hers) == 0
    answered = [
        r["message_reference"]["message_id"] for r in stack.replies() if r.get("message_reference")
    ]
    assert answered[-1] == others["d"]["id"]


async def test_an_attempt_that_never_reports_back_is_due_after_its_pause(
    stack: Stack, sessions: SessionFactory
) -> None:
    # The claim itself schedules the next attempt, so a killed or timed-out job is retried
    # after the pause it would have had; the last attempt's claim waits past the job timeout.
    frame = message_create(content="claimed, then the worker died")
    event_id = frame["d"]["id"]
    await stack.post(frame)
    for attempts_before, lease in ((0, 10 * S), (MAX_ATTEMPTS - 1, LAST_ATTEMPT_LEASE)):
        await set_row(sessions, event_id, attempts=attempts_before)
        before = await db_now(sessions)
        async with unit_of_work(sessions) as session:
            claimed = await claim(session, event_id)
        assert claimed is not None and claimed.attempts == attempts_before + 1
        row = await inbox_row(sessions, event_id)
        assert row.next_attempt_at is not None
        assert before + lease <= row.next_attempt_at <= await db_now(sessions) + lease
    assert timedelta(seconds=100) < LAST_ATTEMPT_LEASE  # past the job timeout


async def test_a_last_attempt_that_never_reported_back_is_dead_lettered_unrun(
    stack: Stack, sessions: SessionFactory
) -> None:
    # The eighth attempt was claimed and its worker died (or the job timed out) each time:
    # the next claim gives it up instead of running it a ninth time.
    frame = message_create(content=f"{MENTION} poison?")
    event_id = frame["d"]["id"]
    await stack.post(frame)
    await set_row(sessions, event_id, attempts=MAX_ATTEMPTS)
    await drain(stack.settings)

    row = await inbox_row(sessions, event_id)
    assert row.dead_at is not None and row.handled_at is None
    assert (row.attempts, row.last_error) == (MAX_ATTEMPTS, "JobLost")
    async with sessions() as session:
        assert await session.get(Message, int(event_id)) is None
    assert stack.discord.calls == []


async def test_the_prune_deletes_only_handled_rows_and_their_step_records(
    stack: Stack, sessions: SessionFactory
) -> None:
    names = ("handled", "pending", "dead")
    frames = {name: message_create(content=f"{name} event") for name in names}
    ids = {name: frame["d"]["id"] for name, frame in frames.items()}
    for frame in frames.values():
        await stack.post(frame)
    await drain(stack.settings)  # all three are handled now; make two of them unfinished
    await set_row(sessions, ids["pending"], handled_at=None, attempts=2)
    await set_row(sessions, ids["dead"], handled_at=None, dead_at=text("now()"))
    async with sessions() as session, session.begin():
        eight_days_ago = text("now() - interval '8 days'")
        await session.execute(update(InboxEvent).values(received_at=eight_days_ago))
        for event_id in ids.values():
            session.add(CompletedStep(event_id=event_id, step="react", result={}))
        await session.flush()
        await session.execute(update(CompletedStep).values(done_at=eight_days_ago))

    assert await prune_inbox(sessions) == 1

    async with sessions() as session:
        kept = set((await session.scalars(select(InboxEvent.id))).all())
        stepped = set((await session.scalars(select(CompletedStep.event_id))).all())
        count = await session.scalar(select(func.count()).select_from(InboxEvent))
    assert kept == {ids["pending"], ids["dead"]} and count == 2
    assert stepped == {ids["pending"], ids["dead"]}
