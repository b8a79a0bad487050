"""A worker process sent SIGTERM mid-turn (a rolling update, a scale-down) while a second
worker runs: it claims nothing new, finishes what ends within its grace period, hands the
rest back, and exits 0. Every turn has exactly one reaction and one reply, and a handed-back
turn is taken by the other worker at once, never after the claim's 110 s lapse."""

from __future__ import annotations

import asyncio
import os
import signal
import time
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
    pair_running,
    post_mentions,
    unhandled_events,
    worker_pair,
)
from tests.support.waiting import wait_until

pytestmark = pytest.mark.faults

TURNS = 3
ANSWER = "Still here, from whichever worker."
# Far below the claim's lapse (job timeout 100 s + 10 s): a handed-back turn that waited for
# it could not meet this.
TAKEN_OVER_WITHIN_S = 30.0


@pytest.mark.parametrize("ending", ["finished-within-grace", "handed-back-at-grace"])
async def test_a_worker_sent_sigterm_mid_turn_drains_and_every_turn_replies_once(
    ending: str,
    fault_settings: Settings,
    fault_sessions: SessionFactory,
    worker_log: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    handed_back = ending == "handed-back-at-grace"
    tally = Tally(f"worker sent SIGTERM mid-turn ({ending}), a second worker running")
    release = asyncio.Event()
    held = True

    async def answer(body: dict[str, Any]) -> Reply:
        if held:  # the draining worker's calls: they wait until told
            await release.wait()
        return Text(ANSWER)

    redis = Redis.from_url(fault_settings.redis_url)
    async with gated_stack(fault_settings, monkeypatch) as (stack, _):
        stack.model.responder = answer
        first, second = worker_pair(stack.settings, worker_log)
        first.env["WORKER_DRAIN_GRACE_S"] = "1" if handed_back else "60"
        async with pair_running(first, second, redis, release=release):
            first.start()
            ids = await post_mentions(stack, tally, turns=TURNS, first_channel=400)
            await wait_until(
                lambda: len(stack.model.requests) == TURNS,
                within=60,
                what="every turn to be inside the model call",
            )
            second.start()
            await second.ready()

            assert first.process is not None
            os.kill(first.process.pid, signal.SIGTERM)
            signalled = time.monotonic()
            tally.injected.append(f"SIGTERM to the worker holding {TURNS} turns in the model call")
            if handed_back:
                held = False  # the second worker's calls answer; the first's never do
            else:
                release.set()  # the draining worker's calls answer within its grace

            async def settled() -> bool:
                queued = await redis.zcount("arq:queue", "-inf", time.time() * 1000)
                return queued == 0 and await unhandled_events(fault_sessions) == 0

            await wait_until(
                lambda: len(stack.discord.posted) >= TURNS,
                within=TAKEN_OVER_WITHIN_S,
                what="a reply to every turn",
            )
            replied_after_s = time.monotonic() - signalled
            await wait_until(settled, within=60, what="every event to be handled")
            exit_code = await asyncio.to_thread(first.process.wait, 30)

        await count_outcomes(tally, fault_sessions, stack.discord, ids, addressed=ids)
        tally.extra["exit_code"] = exit_code
        tally.extra["replied_after_sigterm_s"] = round(replied_after_s, 1)
        tally.extra["model_calls"] = len(stack.model.requests)
        tally.report()

    assert exit_code == 0
    for message_id in ids:
        assert len(stack.discord.reactions_on(message_id)) == 1
    assert sorted(m["content"] for m in stack.discord.posted) == [ANSWER] * TURNS
    assert tally.duplicated == 0 and tally.lost == 0 and tally.acknowledged == TURNS
    assert first.logged('"worker drained"')
    if handed_back:
        # The cut-off calls, then one each by the second worker.
        assert len(stack.model.requests) == 2 * TURNS
        assert first.logged(f'"released": {TURNS}')
    else:
        assert len(stack.model.requests) == TURNS  # the first finished them all
        assert first.logged('"released": 0')
    assert first.started == 1 and second.started == 1
