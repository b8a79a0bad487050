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

from app.chat.fake import Reply, Text
from app.config import Settings
from app.db import SessionFactory
from tests.faults.harness import (
    Tally,
    count_outcomes,
    gated_stack,
    post_mentions,
    unhandled_events,
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
        try:
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

            async def settled() -> bool:
                queued = await redis.zcard("arq:queue")
                return queued == 0 and await unhandled_events(fault_sessions) == 0

            await wait_until(settled, within=60, what="the restarted worker to finish")
        except BaseException:
            print(first.tail(), second.tail(), sep="\n")
            raise
        finally:
            release.set()
            first.kill()
            second.stop()
            await redis.aclose()

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
