"""Redis down for 20 s while events pour in and turns are in flight: the same worker process
reconnects and keeps working (no supervisor restart), the turns in flight finish, and every
acknowledged event is processed exactly once — SPEC invariants 5 and 6."""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from app.chat.fake import Delay, Text
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

BEFORE, DURING, AFTER = 60, 80, 40  # events posted before, during and after the outage
ADDRESSED_EVERY = 5  # every fifth message mentions the bot: a reaction and a reply
CONCURRENCY = 8
OUTAGE_S = 20.0
MODEL_S = 0.5  # the model's fixed latency: turns are inside it when Redis dies
IN_FLIGHT = 2  # turns inside the model call when Redis is killed


async def test_worker_rides_out_redis_down_20s_under_load_in_the_same_process(
    private: Private,
    fault_settings: Settings,
    fault_sessions: SessionFactory,
    worker_log: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    tally = Tally("Redis down 20 s under load, same worker process")
    frames = [
        message_create(
            content=f"<@{BOT_ID}> question {n}" if n % ADDRESSED_EVERY == 0 else f"chatter {n}",
            channel_id=400 + n % 6,
            author_id=2001 + n % 7,
        )
        for n in range(BEFORE + DURING + AFTER)
    ]
    addressed = {int(f["d"]["id"]) for f in frames if f"<@{BOT_ID}>" in f["d"]["content"]}
    acknowledged: list[int] = []
    statuses: list[int] = []

    async with running_stack(fault_settings, monkeypatch) as stack:
        stack.model.responder = lambda body: Delay(MODEL_S, Text("Answered despite Redis."))
        env = worker_env(stack.settings, os.environ["ANTHROPIC_BASE_URL"])
        worker = WorkerProcess(env, worker_log)
        queue = create_queue(fault_settings.redis_url)
        try:
            worker.start()
            assert worker.process is not None
            pid = worker.process.pid
            await worker.polling(queue)
            async with httpx.AsyncClient(base_url=stack.api, timeout=15) as client:

                async def relay(batch: list[dict[str, Any]], *, over_s: float = 0.0) -> None:
                    """Post ``batch`` (CONCURRENCY at a time), spread over ``over_s``."""
                    slots = asyncio.Semaphore(CONCURRENCY)
                    pace = over_s / max(1, len(batch))

                    async def one(n: int, frame: dict[str, Any]) -> None:
                        await asyncio.sleep(n * pace)  # arrival schedule, not a synchronisation
                        async with slots:
                            status, _ = await post(client, frame)
                        tally.sent += 1
                        statuses.append(status)
                        if status == 200:
                            acknowledged.append(int(frame["d"]["id"]))

                    await asyncio.gather(*(one(n, frame) for n, frame in enumerate(batch)))

                await relay(frames[:BEFORE])
                await wait_until(
                    lambda: handled_count(fault_sessions, at_least=5), within=30, what="work"
                )

                def turns_in_model_call() -> bool:
                    return len(stack.model.requests) - len(stack.discord.posted) >= IN_FLIGHT

                await wait_until(turns_in_model_call, within=30, what="turns inside the model")
                in_progress = len(await queue.redis.keys("arq:in-progress:*"))
                queued = await queue.redis.zcard("arq:queue")
                replies_before = len(stack.discord.posted)
                private.redis.kill()
                down_at = time.monotonic()
                tally.injected.append(
                    f"Redis SIGKILLed with {in_progress} jobs in progress, {queued} queued, "
                    f"{len(acknowledged)} acks"
                )
                await relay(frames[BEFORE : BEFORE + DURING], over_s=OUTAGE_S)
                await asyncio.sleep(max(0.0, down_at + OUTAGE_S - time.monotonic()))
                await asyncio.to_thread(private.redis.start)
                tally.injected.append(
                    f"Redis restarted empty after {time.monotonic() - down_at:.1f} s down"
                )
                replies_during = len(stack.discord.posted) - replies_before
                # The same process comes back: it polls again (its health-check key reappears).
                await worker.polling(queue)
                await relay(frames[BEFORE + DURING :])

            swept = await sweep_until_handled(worker, fault_sessions, queue)
        except BaseException:
            print(worker.tail())
            raise
        finally:
            alive_after = worker.alive
            pid_after = worker.process.pid if worker.process else None
            worker.stop()
            await queue.close()

        outage_logged = worker.logged("Redis unreachable") and worker.logged("reachable again")
        tally.acknowledged = len(acknowledged)
        tally.refused = statuses.count(503)
        await count_outcomes(tally, fault_sessions, stack.discord, acknowledged, addressed)
        tally.extra["in_progress_at_kill"] = in_progress
        tally.extra["replies_while_down"] = replies_during
        tally.extra["unfinished_at_first_sweep"] = swept[0]
        tally.extra["memory_jobs_done"] = worker.memory_jobs_done()
        tally.extra["worker_starts"] = worker.started
        tally.extra["worker_pid_unchanged"] = pid_after == pid
        tally.report()

    assert worker.started == 1 and alive_after and pid_after == pid, "the worker was replaced"
    assert outage_logged, "the worker did not log the outage and its end"
    assert in_progress >= IN_FLIGHT, "no job was in flight when Redis died: the fault missed"
    assert statuses == [200] * len(frames), "Redis being down is no reason to refuse an event"
    assert tally.acknowledged == len(frames)
    assert tally.extra["unasked_replies"] == 0
    assert len(stack.discord.posted) == len(addressed)
    assert tally.duplicated == 0
    assert tally.lost == 0
