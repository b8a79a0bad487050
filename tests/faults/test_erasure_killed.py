"""An erasure whose worker is SIGKILLed mid-batch: a second worker resumes it from the last
committed batch and finishes with the same receipt a clean run gives (nothing counted
twice, nothing left behind)."""

from __future__ import annotations

import os
from pathlib import Path

import httpx
import pytest
from redis.asyncio import Redis
from sqlalchemy import text

from app.config import Settings
from app.db import SessionFactory
from tests.faults.harness import Tally, WorkerProcess, gated_stack, pair_running, worker_env
from tests.support.servers import free_port
from tests.support.trust_env import ADMIN
from tests.support.waiting import wait_until

pytestmark = pytest.mark.faults

ALICE, BOB = 2001, 2002
MESSAGES, MEMORIES, OBSERVATIONS, MENTIONS = 1500, 120, 600, 150
BATCH = 20


async def seed(sessions: SessionFactory) -> None:
    """An active member, inserted directly: her messages, memories and observations, and
    Bob's messages that mention her."""
    async with sessions() as session, session.begin():
        await session.execute(
            text(
                "INSERT INTO messages (id, channel_id, guild_id, author_id, author_name, "
                "content, created_at) SELECT 10000 + n, 300, 500, :a, 'alice', "
                "'my own line number ' || n, now() - make_interval(mins => n) "
                "FROM generate_series(1, :n) AS n"
            ),
            {"a": ALICE, "n": MESSAGES},
        )
        await session.execute(
            text(
                "INSERT INTO messages (id, channel_id, guild_id, author_id, author_name, "
                "content, mention_ids, created_at) SELECT 50000 + n, 300, 500, :b, 'bob', "
                "'hey ' || :mention || ' look ' || n, ARRAY[CAST(:a AS bigint)], now() "
                "FROM generate_series(1, :n) AS n"
            ),
            {"a": ALICE, "b": BOB, "n": MENTIONS, "mention": f"<@{ALICE}>"},
        )
        await session.execute(
            text(
                "INSERT INTO memories (user_id, content) "
                "SELECT :a, 'fact ' || n FROM generate_series(1, :n) AS n"
            ),
            {"a": ALICE, "n": MEMORIES},
        )
        await session.execute(
            text(
                "INSERT INTO observations (channel_id, user_id, kind, message_id, content) "
                "SELECT 300, :a, 'message', 10000 + n, 'line ' || n "
                "FROM generate_series(1, :n) AS n"
            ),
            {"a": ALICE, "n": OBSERVATIONS},
        )


async def progress(sessions: SessionFactory) -> tuple[str, str, int]:
    async with sessions() as session:
        row = (
            await session.execute(
                text(
                    "SELECT status, progress ->> 'phase', coalesce((progress -> 'counts' ->> "
                    "'messages')::int, 0) FROM erasures"
                )
            )
        ).one()
    return str(row[0]), str(row[1]), int(row[2])


async def test_an_erasure_killed_mid_batch_resumes_and_finishes_with_the_same_receipt(
    fault_settings: Settings,
    fault_sessions: SessionFactory,
    worker_log: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    tally = Tally("worker SIGKILLed mid-erasure")
    await seed(fault_sessions)
    redis = Redis.from_url(fault_settings.redis_url)
    async with gated_stack(fault_settings, monkeypatch) as (stack, _):
        env = {
            **worker_env(stack.settings, os.environ["ANTHROPIC_BASE_URL"]),
            "ERASURE_BATCH_SIZE": str(BATCH),
        }
        first = WorkerProcess(env, worker_log)
        second = WorkerProcess(
            {**env, "WORKER_METRICS_PORT": str(free_port())},
            worker_log.with_name("second-worker.log"),
        )
        async with pair_running(first, second, redis):
            first.start()
            async with httpx.AsyncClient(base_url=stack.api, headers=ADMIN) as admin:
                started = await admin.post(f"/users/{ALICE}/erase")
                assert started.status_code == 202
                erasure_id = started.json()["erasureId"]

                async def mid_messages() -> bool:
                    _, phase, erased = await progress(fault_sessions)
                    return phase == "messages" and erased >= 5 * BATCH

                await wait_until(mid_messages, within=60, what="the erasure to be mid-way")
                first.kill()
                _, phase, erased_before = await progress(fault_sessions)
                tally.injected.append(f"SIGKILL in phase {phase} after {erased_before} messages")
                stale = await redis.keys("arq:in-progress:erasure:*")
                assert stale, "the killed job left no in-progress key"
                await redis.delete(*stale)  # what ARQ's lease expiry does, without the wait
                second.start()

                async def done() -> bool:
                    return (await progress(fault_sessions))[0] == "done"

                await wait_until(done, within=90, what="the resumed erasure to finish")
                status = (await admin.get(f"/erasures/{erasure_id}")).json()

    receipt = status["receipt"]
    tally.extra.update(receipt_messages=receipt["messages"], memories=receipt["memories"])
    tally.report()
    assert erased_before < MESSAGES  # it really was killed mid-way
    assert receipt["messages"] == MESSAGES
    assert receipt["memories"] == MEMORIES
    assert receipt["observations"] == OBSERVATIONS
    assert receipt["mentions_replaced"] == MENTIONS
    async with fault_sessions() as session:
        left = await session.scalar(
            text(
                "SELECT (SELECT count(*) FROM messages WHERE author_id = :a)"
                " + (SELECT count(*) FROM memories WHERE user_id = :a)"
                " + (SELECT count(*) FROM observations WHERE user_id = :a)"
                " + (SELECT count(*) FROM messages WHERE content LIKE :mention)"
            ),
            {"a": ALICE, "mention": f"%<@{ALICE}>%"},
        )
        bobs = await session.scalar(
            text("SELECT count(*) FROM messages WHERE author_id = :b"), {"b": BOB}
        )
    assert left == 0 and bobs == MENTIONS
