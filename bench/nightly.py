"""Benchmark one nightly run over 1,000 active speakers, with fixed fake latencies.

    python -m bench.nightly [--speakers 1000] [--concurrency N] [--decision-ms 50]
                            [--model-ms 300]

A fresh database holds yesterday's talk: speaker i said 3 + (7i mod 48) messages (1 to 5
chunks of six after the cap; the busiest said 50, whose newest five chunks alone count) and
has two memories, one stale. The real worker (``python -m bench._worker``, as deployed, with
NIGHTLY_CONCURRENCY from ``--concurrency`` or its default) runs the whole chain. The decision
service answers after ``--decision-ms``: worth keeping, keep each memory, add one; the model
writes after ``--model-ms``. So every chunk's critical path is worth_keeping, the verdicts
(in parallel), add_memory, then the writer: 3 decisions + 1 model call.

Prints the run's wall time (start to finished) against the sequential critical path (every
chunk one after another, then the decay batches and the diary) and against the best the
concurrency allows (the same, one wave of chunks after another), then each decision and model
call count against its cap: five chunks a speaker, a verdict per memory read (at most ten),
one add_memory a chunk, twenty stale reviews a night, one writer call a chunk here, one diary.
Exits 1 if a count is over its cap or the run did not finish."""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import asyncpg
from redis.asyncio import Redis

from app.chat.fake import Delay, FakeAnthropic, Reply, Text
from app.db import create_engine, create_session_factory
from app.decision.fake import FakeJev
from app.decision.vocabulary import Question
from app.kit.arqueue import create_queue
from app.kit.clock import utcnow
from app.memory.decay import STALE_CAP
from app.nightly.diary import DIARY_SYSTEM
from app.nightly.run import Started, start_nightly_run
from app.nightly.steps import CHUNKS_PER_SPEAKER, DECAY_BATCH
from app.nightly.style import STYLE_SYSTEM
from bench._rig import (
    asyncpg_dsn,
    bench_db,
    bench_redis_url,
    fresh_database,
    serve,
    start_process,
)
from bench._taps import Watch
from tests.support.servers import free_port

DB = bench_db("_nightly")
REDIS_URL = bench_redis_url(13)
TOKEN = "bench-gateway-token-5e7a9c1b3d2f4068"
BOT_ID = 1000
CHANNELS = 50
MEMORIES = 2  # per speaker: one fresh, one stale
VERDICT_CAP = 10  # memories read per chunk (recall's ten)


def said(i: int) -> int:
    """Messages speaker ``i`` said yesterday."""
    return 3 + (7 * i) % 48


def chunks_of(i: int) -> int:
    return min(CHUNKS_PER_SPEAKER, math.ceil(said(i) / 6))


async def seed(speakers: int) -> None:
    """Yesterday's talk (all inside the run's window) and each speaker's two memories."""
    conn = await asyncpg.connect(asyncpg_dsn(DB))
    try:
        await conn.execute(
            """
            INSERT INTO messages (id, channel_id, guild_id, author_id, author_name, is_bot,
                                  content, created_at)
            SELECT s.i * 1000 + k, 900000 + s.i % $2, 500, 70000 + s.i, 'speaker ' || s.i,
                   false, 'speaker ' || s.i || ' says thing number ' || k || ' about their day',
                   now() - interval '20 hours' + make_interval(secs => k * 60 + s.i % 60)
            FROM generate_series(0, $1 - 1) AS s(i),
                 generate_series(1, 3 + (7 * s.i) % 48) AS k
            """,
            speakers,
            CHANNELS,
        )
        await conn.execute(
            """
            INSERT INTO memories (user_id, content, created_at, updated_at)
            SELECT 70000 + s.i, 'speaker ' || s.i || ' memory ' || n,
                   now() - make_interval(days => CASE n WHEN 1 THEN 1 ELSE 60 + s.i % 30 END),
                   now() - make_interval(days => CASE n WHEN 1 THEN 1 ELSE 60 + s.i % 30 END)
            FROM generate_series(0, $1 - 1) AS s(i), generate_series(1, $2) AS n
            """,
            speakers,
            MEMORIES,
        )
    finally:
        await conn.close()


@dataclass
class Calls:
    """Decision calls by question, as the fake decision service received them."""

    asked: Counter[str]

    def jev(self, method: str, path: str, body: bytes, arrived: float) -> None:
        if path == "/v1/decide":
            self.asked[str(json.loads(body).get("question"))] += 1


def purpose(body: dict[str, Any]) -> str:
    system = "".join(block["text"] for block in body.get("system") or [])
    return {DIARY_SYSTEM: "diary", STYLE_SYSTEM: "style"}.get(system, "memory writer")


def model_purposes(model: FakeAnthropic) -> Counter[str]:
    return Counter(purpose(body) for body in model.requests)


async def wait_finished(run_id: int, within: float) -> dict[str, Any]:
    conn = await asyncpg.connect(asyncpg_dsn(DB))
    try:
        deadline = time.monotonic() + within
        while time.monotonic() < deadline:
            row = await conn.fetchrow(
                "SELECT status, started_at, finished_at, summary FROM nightly_runs WHERE id = $1",
                run_id,
            )
            if row is not None and row["status"] != "running":
                return dict(row)
            await asyncio.sleep(0.5)
    finally:
        await conn.close()
    raise RuntimeError(f"nightly run {run_id} still running after {within:.0f} s")


def check(name: str, count: int, cap: int, problems: list[str]) -> str:
    if count > cap:
        problems.append(f"{name}: {count} over its cap {cap}")
    return f"  {name:<42} {count:7d}   cap {cap:7d}   {'ok' if count <= cap else 'OVER'}"


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--speakers", type=int, default=1000)
    parser.add_argument("--concurrency", type=int, default=None, help="NIGHTLY_CONCURRENCY")
    parser.add_argument("--decision-ms", type=float, default=50.0)
    parser.add_argument("--model-ms", type=float, default=300.0)
    parser.add_argument("--timeout", type=float, default=3600.0)
    args = parser.parse_args()
    decision_s, model_s = args.decision_ms / 1000, args.model_ms / 1000

    database_url = await fresh_database(DB)
    await seed(args.speakers)
    redis = Redis.from_url(REDIS_URL)
    await redis.flushdb()
    calls = Calls(Counter())
    jev = FakeJev(latency=decision_s)
    jev.answers[Question.WORTH_KEEPING] = 0.9
    jev.answers[Question.ADD_MEMORY] = 0.9
    jev.answers[Question.MEMORY_VERDICT] = "keep"
    jev.answers[Question.STALE_KEEP] = "keep"

    def writer(body: dict[str, Any]) -> Reply:
        if purpose(body) == "diary":
            return Delay(model_s, Text("今日はたくさんの人が話した。"))
        return Delay(model_s, Text('{"subject": "speaker", "fact": "They had a busy day."}'))

    model = FakeAnthropic(responder=writer)
    logs = Path(tempfile.mkdtemp(prefix="bench-nightly-"))
    async with serve(Watch(jev.app, calls.jev)) as jev_url, serve(model.app) as model_url:
        env = {
            **os.environ,
            "DATABASE_URL": database_url,
            "REDIS_URL": REDIS_URL,
            "GATEWAY_TOKEN": TOKEN,
            "DISCORD_BOT_TOKEN": "bench-bot-token",
            "DISCORD_BOT_USER_ID": str(BOT_ID),
            "JEV_URL": jev_url,
            "JEV_API_KEY": "bench-jev-key",
            "ANTHROPIC_BASE_URL": model_url,
            "ANTHROPIC_API_KEY": "bench-anthropic-key",
            "WORKER_METRICS_PORT": str(free_port()),
        }
        if args.concurrency is not None:
            env["NIGHTLY_CONCURRENCY"] = str(args.concurrency)
        worker = start_process(["-m", "bench._worker"], env, logs / "worker.log")
        engine = create_engine(database_url, pool_size=2)
        queue = create_queue(REDIS_URL)
        try:
            started = await start_nightly_run(create_session_factory(engine), queue, now=utcnow())
            assert isinstance(started, Started)
            run = await wait_finished(started.run_id, args.timeout)
            ended = run["finished_at"] or utcnow()
            wall = (ended - run["started_at"]).total_seconds()
        except Exception:
            print(f"failed; worker log in {logs}", file=sys.stderr)
            raise
        finally:
            worker.terminate()
            worker.wait(timeout=20)
            await queue.close()
            await engine.dispose()
            await redis.aclose()
    report(args, run, wall, calls, model, decision_s, model_s)


def report(
    args: argparse.Namespace,
    run: dict[str, Any],
    wall: float,
    calls: Calls,
    model: FakeAnthropic,
    decision_s: float,
    model_s: float,
) -> None:
    summary = json.loads(run["summary"]) if isinstance(run["summary"], str) else run["summary"]
    progress = summary.get("progress", {})
    planned = sum(chunks_of(i) for i in range(args.speakers))
    waves = len(progress.get("waves") or [])
    chunk_path = 3 * decision_s + model_s
    tail = math.ceil(STALE_CAP / DECAY_BATCH) * decision_s + model_s  # decay batches, diary
    sequential = planned * chunk_path + tail
    best = waves * chunk_path + tail
    concurrency = args.concurrency or "default"
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    print(
        f"speakers={args.speakers} chunks planned={planned} waves={waves} "
        f"NIGHTLY_CONCURRENCY={concurrency} cores={os.cpu_count()} load average {load}"
    )
    print(
        f"fixed latencies: decision {decision_s * 1000:.0f} ms, model {model_s * 1000:.0f} ms; "
        f"a chunk's critical path {chunk_path * 1000:.0f} ms"
    )
    print(f"run status: {run['status']}, errors: {len(summary.get('errors', []))}")
    print(f"wall time (start to finished)            {wall:8.1f} s")
    print(f"sequential critical path                 {sequential:8.1f} s")
    print(f"critical path at this concurrency (waves) {best:7.1f} s")
    problems: list[str] = []
    if run["status"] != "finished":
        problems.append(f"the run ended {run['status']}")
    purposes = model_purposes(model)
    print("calls against their caps:")
    lines = [
        check("worth_keeping (chunks extracted)", calls.asked["worth_keeping"], planned, problems),
        check(
            "  = 5 chunks a speaker at most",
            calls.asked["worth_keeping"],
            CHUNKS_PER_SPEAKER * args.speakers,
            problems,
        ),
        check(
            "memory_verdict (10 per chunk)",
            calls.asked["memory_verdict"],
            VERDICT_CAP * planned,
            problems,
        ),
        check("add_memory (1 per chunk)", calls.asked["add_memory"], planned, problems),
        check("stale_keep (20 a night)", calls.asked["stale_keep"], STALE_CAP, problems),
        check(
            "model: memory writer (1 per chunk here)",
            purposes["memory writer"],
            planned,
            problems,
        ),
        check("model: diary (1 a night)", purposes["diary"], 1, problems),
        check("model: style (1 a night)", purposes["style"], 1, problems),
    ]
    print("\n".join(lines))
    print(
        f"the run's own count: decision_calls={summary.get('decision_calls')} "
        f"model_calls={summary.get('model_calls')}"
    )
    print(f"wall/sequential-critical-path ratio: {wall / sequential:.3f}")
    if problems:
        for problem in problems:
            print(f"CHECK FAILED: {problem}")
        raise SystemExit(1)


if __name__ == "__main__":
    asyncio.run(main())
