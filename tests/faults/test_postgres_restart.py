"""Postgres crashed (immediate shutdown) and restarted while events pour in: the webhook
answers 503 while it cannot record, the relay's retries are accepted afterwards, and every
acknowledged event is processed exactly once (docs/operations.md, "Retries and dead letters")."""

from __future__ import annotations

import asyncio
import itertools
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
    post,
    post_until_acknowledged,
    sweep_until_handled,
    worker_env,
)
from tests.support.frames import message_create
from tests.support.stack import BOT_ID, running_stack
from tests.support.waiting import wait_until

pytestmark = pytest.mark.faults

ADDRESSED_EVERY = 10
CONCURRENCY = 8
BEFORE, AFTER = 60, 60  # acknowledged events before the crash, and after the restart
REFUSED_BEFORE_RESTART = 10  # 503s to see before Postgres comes back
RELAY_BACKOFF_S = 0.05  # a relay pauses after a 503 instead of hammering


def _frames() -> Any:
    for n in itertools.count():
        text = f"<@{BOT_ID}> question {n}" if n % ADDRESSED_EVERY == 0 else f"chatter {n}"
        yield message_create(content=text, channel_id=500 + n % 4, author_id=2001 + n % 5)


async def test_postgres_restarted_refuses_then_loses_nothing(
    private: Private,
    fault_settings: Settings,
    fault_sessions: SessionFactory,
    worker_log: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    tally = Tally("Postgres crashed and restarted")
    sent: list[dict[str, Any]] = []
    acknowledged: list[int] = []
    refused: list[dict[str, Any]] = []
    other: list[int] = []
    phase = {"restarted": False, "after": 0, "stop": False}

    async with running_stack(fault_settings, monkeypatch) as stack:
        env = worker_env(stack.settings, os.environ["ANTHROPIC_BASE_URL"])
        worker = WorkerProcess(env, worker_log)
        queue = create_queue(fault_settings.redis_url)
        try:
            worker.start()
            await worker.polling(queue)
            async with httpx.AsyncClient(base_url=stack.api, timeout=15) as client:
                frames = _frames()

                async def relay() -> None:
                    while not phase["stop"]:
                        frame = next(frames)
                        sent.append(frame)
                        status, _ = await post(client, frame)
                        if status == 200:
                            acknowledged.append(int(frame["d"]["id"]))
                            phase["after"] += bool(phase["restarted"])
                        elif status == 503:
                            refused.append(frame)
                            await asyncio.sleep(RELAY_BACKOFF_S)
                        else:
                            other.append(status)

                async def chaos() -> None:
                    await wait_until(lambda: len(acknowledged) >= BEFORE, within=60, what="acks")
                    await asyncio.to_thread(private.postgres.crash)
                    tally.injected.append(
                        f"Postgres stopped -m immediate after {len(acknowledged)} acks"
                    )
                    await wait_until(
                        lambda: len(refused) >= REFUSED_BEFORE_RESTART, within=60, what="503s"
                    )
                    await asyncio.to_thread(private.postgres.start)
                    phase["restarted"] = True
                    tally.injected.append(f"Postgres restarted after {len(refused)} 503s")
                    await wait_until(lambda: phase["after"] >= AFTER, within=60, what="acks")
                    phase["stop"] = True

                await asyncio.gather(chaos(), *(relay() for _ in range(CONCURRENCY)))
                # The relay retries every refused event until it is acknowledged.
                retries = [post_until_acknowledged(client, frame) for frame in refused]
                attempts = await asyncio.gather(*retries)
            acknowledged.extend(int(frame["d"]["id"]) for frame in refused)

            swept = await sweep_until_handled(worker, fault_sessions, queue)
        except BaseException:
            print(worker.tail())
            raise
        finally:
            worker.stop()
            await queue.close()

        addressed = {int(f["d"]["id"]) for f in sent if f"<@{BOT_ID}>" in f["d"]["content"]}
        tally.sent = len(sent)
        tally.acknowledged = len(set(acknowledged))
        tally.refused = len(refused)
        await count_outcomes(tally, fault_sessions, stack.discord, acknowledged, addressed)
        tally.extra["retry_attempts"] = sum(attempts)
        tally.extra["unfinished_at_first_sweep"] = swept[0]
        tally.extra["replies"] = len(stack.discord.posted)
        tally.extra["memory_jobs_done"] = worker.memory_jobs_done()
        tally.extra["worker_starts"] = worker.started
        tally.report()

    assert other == [], "only 200 or 503 while Postgres is down"
    assert tally.refused >= REFUSED_BEFORE_RESTART
    assert tally.acknowledged == tally.sent, "every event is acknowledged after its retries"
    assert tally.extra["unasked_replies"] == 0
    assert len(stack.discord.posted) == len(addressed)
    assert tally.duplicated == 0
    assert tally.lost == 0
