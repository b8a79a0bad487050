"""Redis killed and restarted (empty) while events pour in and a worker is busy: the webhook
keeps acknowledging, and every acknowledged event is processed exactly once (the inbox
sweeper re-enqueues what Redis lost) — SPEC invariants 5 and 6."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any

import httpx
import pytest

from app.config import Settings
from app.db import SessionFactory
from app.kit.arqueue import create_queue
from tests.faults.conftest import Private
from tests.faults.harness import (
    Tally,
    WorkerProcess,
    count_outcomes,
    handled_count,
    post,
    sweep_until_handled,
    worker_env,
)
from tests.support.frames import message_create
from tests.support.stack import BOT_ID, running_stack
from tests.support.waiting import wait_until

pytestmark = pytest.mark.faults

EVENTS = 200
ADDRESSED_EVERY = 10  # every tenth message mentions the bot: a reaction and a reply
CONCURRENCY = 16
KILL_AT, RESTART_AT = 80, 150  # events posted when Redis dies, then comes back
WORKING = 5  # events the worker has finished when Redis is killed


async def test_redis_restarted_under_load_loses_nothing(
    private: Private,
    fault_settings: Settings,
    fault_sessions: SessionFactory,
    worker_log: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    tally = Tally("Redis restarted under load")
    frames = [
        message_create(
            content=f"<@{BOT_ID}> question {n}" if n % ADDRESSED_EVERY == 0 else f"chatter {n}",
            channel_id=400 + n % 4,
            author_id=2001 + n % 7,
        )
        for n in range(EVENTS)
    ]
    addressed = {int(f["d"]["id"]) for f in frames if f"<@{BOT_ID}>" in f["d"]["content"]}
    acknowledged: list[int] = []
    statuses: list[int] = []

    async with running_stack(fault_settings, monkeypatch) as stack:
        env = worker_env(stack.settings, os.environ["ANTHROPIC_BASE_URL"])
        worker = WorkerProcess(env, worker_log)
        queue = create_queue(fault_settings.redis_url)
        try:
            worker.start()
            await worker.polling(queue)
            async with httpx.AsyncClient(base_url=stack.api, timeout=15) as client:

                async def relay(batch: list[dict[str, Any]]) -> None:
                    slots = asyncio.Semaphore(CONCURRENCY)

                    async def one(frame: dict[str, Any]) -> None:
                        async with slots:
                            status, _ = await post(client, frame)
                        tally.sent += 1
                        statuses.append(status)
                        if status == 200:
                            acknowledged.append(int(frame["d"]["id"]))

                    await asyncio.gather(*(one(frame) for frame in batch))

                await relay(frames[:KILL_AT])
                # Kill while the worker is busy: some events done, the rest queued or running.
                await wait_until(
                    lambda: handled_count(fault_sessions, at_least=WORKING),
                    within=30,
                    what="the worker to be busy",
                )
                queued = await queue.redis.zcard("arq:queue")
                private.redis.kill()
                tally.injected.append(
                    f"Redis SIGKILLed after {len(acknowledged)} acks, "
                    f"{queued} jobs queued or running"
                )
                await relay(frames[KILL_AT:RESTART_AT])
                await asyncio.to_thread(private.redis.start)
                tally.injected.append(f"Redis restarted empty after {len(acknowledged)} acks")
                await relay(frames[RESTART_AT:])

            swept = await sweep_until_handled(worker, fault_sessions, queue)
        except BaseException:
            print(worker.tail())
            raise
        finally:
            worker.stop()
            await queue.close()

        tally.acknowledged = len(acknowledged)
        tally.refused = statuses.count(503)
        await count_outcomes(tally, fault_sessions, stack.discord, acknowledged, addressed)
        tally.extra["unfinished_at_first_sweep"] = swept[0]
        tally.extra["replies"] = len(stack.discord.posted)
        tally.extra["memory_jobs_done"] = worker.memory_jobs_done()
        tally.extra["worker_starts"] = worker.started  # 1: the worker rides out the outage
        tally.report()

    assert statuses == [200] * EVENTS, "Redis being down is no reason to refuse an event"
    assert tally.acknowledged == EVENTS
    assert swept[0] > 0, "the restart lost no queued event: the fault did not bite"
    assert tally.extra["unasked_replies"] == 0
    assert len(stack.discord.posted) == len(addressed)
    assert tally.duplicated == 0
    assert tally.lost == 0
