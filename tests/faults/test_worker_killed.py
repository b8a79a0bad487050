"""A worker process SIGKILLed mid-turn (after the reaction, inside the model call): after a
restart every turn has exactly one reaction and exactly one reply (SPEC invariant 5)."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any

import httpx
import pytest
from redis.asyncio import Redis

from app.chat.fake import Reply, Text
from app.config import Settings
from app.db import SessionFactory
from tests.faults.harness import (
    Tally,
    WorkerProcess,
    count_outcomes,
    post,
    unhandled_events,
    wait_until,
    worker_env,
)
from tests.support.frames import message_create
from tests.support.stack import BOT_ID, running_stack

pytestmark = pytest.mark.faults

TURNS = 3
ANSWER = "Here I am, after the restart."


async def test_worker_sigkilled_mid_turn_replies_exactly_once(
    fault_settings: Settings,
    fault_sessions: SessionFactory,
    worker_log: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    tally = Tally("worker SIGKILLed mid-turn")
    model_slow = True
    release = asyncio.Event()

    async def answer(body: dict[str, Any]) -> Reply:
        # While the first worker runs, the model does not answer: the kill lands inside the call.
        if model_slow:
            await release.wait()
            return Text("never delivered")
        return Text(ANSWER)

    redis = Redis.from_url(fault_settings.redis_url)
    async with running_stack(fault_settings, monkeypatch) as stack:
        stack.model.responder = answer
        env = worker_env(stack.settings, os.environ["ANTHROPIC_BASE_URL"])
        first, second = WorkerProcess(env, worker_log), WorkerProcess(env, worker_log)
        try:
            first.start()
            frames = [
                message_create(content=f"<@{BOT_ID}> hello number {n}", channel_id=300 + n)
                for n in range(TURNS)
            ]
            ids = {int(f["d"]["id"]) for f in frames}
            async with httpx.AsyncClient(base_url=stack.api, timeout=10) as client:
                for frame in frames:
                    status, _ = await post(client, frame)
                    tally.sent += 1
                    tally.acknowledged += status == 200
            await wait_until(
                lambda: (
                    len(stack.discord.reactions) == TURNS and len(stack.model.requests) == TURNS
                ),
                within=60,
                what="every turn to have reacted and to be waiting on the model",
            )
            assert stack.discord.posted == [], "a reply was posted before the kill"
            first.kill()
            release.set()  # the held answers go to a dead connection
            tally.injected.append(f"SIGKILL worker with {TURNS} turns inside the model call")

            # ARQ re-runs a dead worker's job once its in-progress key lapses (job timeout
            # 100 s + 10 s). We let it lapse now by deleting the stale keys ARQ would expire.
            stale = await redis.keys("arq:in-progress:event:*")
            assert len(stale) == TURNS, stale
            await redis.delete(*stale)
            tally.injected.append(f"{len(stale)} stale in-progress keys lapsed (deleted)")

            model_slow = False
            second.start()

            async def settled() -> bool:
                queued = await redis.zcard("arq:queue")
                return queued == 0 and await unhandled_events(fault_sessions) == 0

            await wait_until(settled, within=60, what="the restarted worker to finish")
        except BaseException:
            print(first.tail())
            raise
        finally:
            release.set()
            first.kill()
            second.stop()
            await redis.aclose()

        await count_outcomes(tally, fault_sessions, stack.discord, ids, addressed=ids)
        tally.extra["model_calls"] = len(stack.model.requests)
        tally.extra["reaction_puts"] = len(stack.discord.calls_to("PUT", "/channels/"))
        tally.report()
        for message_id in ids:
            assert len(stack.discord.reactions_on(message_id)) == 1
        assert sorted(m["content"] for m in stack.discord.posted) == [ANSWER] * TURNS
        assert tally.acknowledged == TURNS
        assert tally.duplicated == 0
        assert tally.lost == 0
