"""A worker process SIGKILLed mid-turn — inside the model call, or after Discord created the
reply but before its answer arrived: once its claims lapse every turn has exactly one
reaction and exactly one reply (SPEC invariant 5), whether a restarted worker takes the turns
over or a second worker that was already running does."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from redis.asyncio import Redis
from sqlalchemy import text

from app.chat.fake import Reply, Text
from app.config import Settings
from app.db import SessionFactory
from app.decision.vocabulary import Question
from tests.faults.harness import (
    Tally,
    count_outcomes,
    gated_stack,
    pair_running,
    post_mentions,
    wait_until_drained,
    worker_pair,
)
from tests.support.waiting import wait_until

pytestmark = pytest.mark.faults

TURNS = 3
ANSWER = "Here I am, after the restart."


@pytest.mark.parametrize("workers", [1, 2])
@pytest.mark.parametrize("kill_point", ["inside-model-call", "reply-posted-answer-lost"])
async def test_worker_sigkilled_mid_turn_replies_exactly_once(
    kill_point: str,
    workers: int,
    fault_settings: Settings,
    fault_sessions: SessionFactory,
    worker_log: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    in_model = kill_point == "inside-model-call"
    tally = Tally(f"worker SIGKILLed mid-turn ({kill_point}, {workers} worker(s))")
    model_slow = in_model
    release = asyncio.Event()

    async def answer(body: dict[str, Any]) -> Reply:
        # While the first worker runs, the model does not answer: the kill lands inside the call.
        if model_slow:
            await release.wait()
            return Text("never delivered")
        return Text(ANSWER)

    redis = Redis.from_url(fault_settings.redis_url)
    async with gated_stack(fault_settings, monkeypatch) as (stack, gate):
        stack.model.responder = answer
        # Otherwise Discord creates each reply but its answer never reaches the worker.
        gate.closed = not in_model
        # The second is a restart (one worker), or was running all along beside the first.
        first, second = worker_pair(stack.settings, worker_log)
        async with pair_running(first, second, redis, release=release):
            first.start()
            ids = await post_mentions(stack, tally, turns=TURNS, first_channel=300)

            def at_kill_point() -> bool:
                if len(stack.discord.reactions) < TURNS:
                    return False
                if in_model:
                    return len(stack.model.requests) == TURNS
                return gate.held == TURNS and len(stack.discord.posted) == TURNS

            await wait_until(at_kill_point, within=60, what=f"every turn to reach {kill_point}")
            if workers == 2:  # every turn is the first's: the second starts once they are claimed
                second.start()
                await second.ready()
            posted_before = len(stack.discord.posted)
            first.kill()
            release.set()  # held answers go to a dead connection
            gate.open()
            tally.injected.append(
                f"SIGKILL worker with {TURNS} turns at {kill_point} "
                f"({posted_before} replies already created)"
            )

            # ARQ re-runs a dead worker's job once its in-progress key lapses (job timeout
            # 100 s + 10 s). We let it lapse now by deleting the stale keys ARQ would expire.
            stale = await redis.keys("arq:in-progress:event:*")
            assert len(stale) == TURNS, stale
            await redis.delete(*stale)
            tally.injected.append(f"{len(stale)} stale in-progress keys lapsed (deleted)")

            model_slow = False
            if workers == 1:
                second.start()

            await wait_until_drained(redis, fault_sessions)

        await count_outcomes(tally, fault_sessions, stack.discord, ids, addressed=ids)
        posts = [c for c in stack.discord.calls_to("POST") if c.path.endswith("/messages")]
        tally.extra["model_calls"] = len(stack.model.requests)
        tally.extra["reply_posts"] = len(posts)
        tally.extra["reaction_puts"] = len(stack.discord.calls_to("PUT", "/channels/"))
        tally.extra["second_worker_started"] = "after the kill" if workers == 1 else "before"
        tally.report()

    for message_id in ids:
        assert len(stack.discord.reactions_on(message_id)) == 1
    assert sorted(m["content"] for m in stack.discord.posted) == [ANSWER] * TURNS
    if in_model:
        assert posted_before == 0, "a reply was posted before the kill"
        assert len(stack.model.requests) == 2 * TURNS  # the killed calls, then one each
    else:
        # The text was fixed before posting, so the retry re-posts it (same nonce) unchanged.
        assert len(stack.model.requests) == TURNS
        assert len(posts) == 2 * TURNS
    assert second.started == 1 and first.started == 1
    assert tally.acknowledged == TURNS
    assert tally.duplicated == 0
    assert tally.lost == 0


# The turn overlaps its own bookkeeping with the calls it waits on; these are the kill points
# that ordering creates. Each holds one table's writes with a lock (the turn's reads still
# pass), so the worker is killed exactly where its record has not committed yet.
OVERLAPS = {
    # The emoji questions are asked while the message's log row commits.
    "questions-asked-log-not-committed": "messages",
    # The reply is posted while the record of its text commits.
    "reply-posted-text-not-recorded": "completed_steps",
}


@pytest.mark.parametrize("kill_point", sorted(OVERLAPS))
async def test_worker_sigkilled_where_the_turn_overlaps_does_each_side_effect_once(
    kill_point: str,
    fault_settings: Settings,
    fault_sessions: SessionFactory,
    worker_log: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    tally = Tally(f"worker SIGKILLed where the turn overlaps ({kill_point})")
    at_reply = kill_point == "reply-posted-text-not-recorded"
    release = asyncio.Event()

    async def answer(body: dict[str, Any]) -> Reply:
        await release.wait()  # held until the lock is taken: every turn waits in the call
        return Text(ANSWER)

    redis = Redis.from_url(fault_settings.redis_url)
    async with gated_stack(fault_settings, monkeypatch) as (stack, _), fault_sessions() as lock:
        stack.model.responder = answer
        first, second = worker_pair(stack.settings, worker_log)
        async with pair_running(first, second, redis, release=release):
            if not at_reply:
                await lock.execute(text(f"LOCK TABLE {OVERLAPS[kill_point]} IN EXCLUSIVE MODE"))
                release.set()
            first.start()
            ids = await post_mentions(stack, tally, turns=TURNS, first_channel=400)
            if at_reply:
                # Every turn has reacted (its record committed) and waits on the model.
                await wait_until(
                    lambda: (
                        len(stack.model.requests) == TURNS and len(stack.discord.reactions) == TURNS
                    ),
                    within=60,
                    what="every turn to wait on the model",
                )
                await lock.execute(text(f"LOCK TABLE {OVERLAPS[kill_point]} IN EXCLUSIVE MODE"))
                release.set()
                await wait_until(
                    lambda: len(stack.discord.posted) == TURNS,
                    within=60,
                    what="every reply to be posted while its text's record waits",
                )
            else:
                await wait_until(
                    lambda: len(stack.jev.asked(Question.EMOJI_CHOICE)) == TURNS,
                    within=60,
                    what="every turn's emoji questions while its log row waits",
                )
            side_effects = (len(stack.discord.reactions), len(stack.discord.posted))
            first.kill()
            await lock.rollback()  # the dead worker's transactions never commit
            tally.injected.append(
                f"SIGKILL worker with {TURNS} turns at {kill_point} "
                f"(reactions, replies before the kill: {side_effects})"
            )
            stale = await redis.keys("arq:in-progress:event:*")
            assert len(stale) == TURNS, stale
            await redis.delete(*stale)
            second.start()

            await wait_until_drained(redis, fault_sessions)
            await wait_until(
                lambda: second.memory_jobs_done() == TURNS,
                within=60,
                what="each reply's memory job",
            )

        await count_outcomes(tally, fault_sessions, stack.discord, ids, addressed=ids)
        posts = [c for c in stack.discord.calls_to("POST") if c.path.endswith("/messages")]
        tally.extra["model_calls"] = len(stack.model.requests)
        tally.extra["reply_posts"] = len(posts)
        tally.extra["emoji_questions"] = len(stack.jev.asked(Question.EMOJI_CHOICE))
        tally.extra["memory_jobs"] = first.memory_jobs_done() + second.memory_jobs_done()
        tally.report()
        async with fault_sessions() as session:
            logged = await session.scalar(
                text("SELECT count(*) FROM messages WHERE id = ANY(:ids)"), {"ids": sorted(ids)}
            )

    for message_id in ids:
        assert len(stack.discord.reactions_on(message_id)) == 1
    assert sorted(m["content"] for m in stack.discord.posted) == [ANSWER] * TURNS
    assert logged == TURNS
    if at_reply:
        assert side_effects == (TURNS, TURNS)
        # Nothing fixed the text, so the retry composes it again, and the same nonce gets
        # Discord's first message back rather than a second.
        assert len(stack.model.requests) == 2 * TURNS
        assert len(posts) == 2 * TURNS
    else:
        assert side_effects == (0, 0), "a side effect came before the log row's commit"
        assert len(stack.jev.asked(Question.EMOJI_CHOICE)) == 2 * TURNS
        assert len(stack.model.requests) == TURNS
    assert tally.extra["memory_jobs"] == TURNS
    assert tally.acknowledged == TURNS
    assert tally.duplicated == 0
    assert tally.lost == 0
