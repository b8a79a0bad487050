"""What an idle worker costs: CPU time of the real worker process while nothing is queued.

    python -m bench.idle [--seconds 10] [--rounds 3] [--baseline-poll 0.02]

Starts the worker as deployed (``python -m bench._worker``, i.e. ``python -m app
worker``) and, as the baseline, the same worker polling every
``--baseline-poll`` seconds (the 20 ms poll the worker used before wake-ups), one at a time
against a fresh database and an empty Redis. After each has polled once and settled, reads
its CPU time over ``--seconds``: the sum of its threads' /proc/<pid>/task/*/schedstat
(nanoseconds; /proc/<pid>/stat counts 10 ms ticks, too coarse for an idle process), with
/proc/<pid>/stat's user+system ticks beside it. Rounds alternate the two.
Prints CPU % per round, the medians, and last the deployed/baseline ratio."""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import time

from redis.asyncio import Redis

from bench._rig import bench_db, bench_redis_url, cpu_seconds, fresh_database
from tests.support.servers import free_port

DB = bench_db("_idle")
REDIS_URL = bench_redis_url(13)
SETTLE_S = 2.0  # start-up work (migrations check, first sweep) is not idling


def start_worker(env: dict[str, str], poll: float | None) -> subprocess.Popen[bytes]:
    args = [sys.executable, "-m", "bench._worker", *([str(poll)] if poll is not None else [])]
    return subprocess.Popen(args, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)


async def measure(database_url: str, poll: float | None, seconds: float) -> tuple[float, float]:
    """CPU % of one idle worker over ``seconds``: (schedstat, stat)."""
    redis = Redis.from_url(REDIS_URL)
    await redis.flushdb()
    env = {
        **os.environ,
        "DATABASE_URL": database_url,
        "REDIS_URL": REDIS_URL,
        "GATEWAY_TOKEN": "bench-gateway-token-5e7a9c1b3d2f4068",
        "DISCORD_BOT_TOKEN": "bench-bot-token",
        "DISCORD_BOT_USER_ID": "1000",
        "WORKER_METRICS_PORT": str(free_port()),
    }
    worker = start_worker(env, poll)
    try:
        deadline = time.monotonic() + 60
        while not await redis.exists("arq:queue:health-check"):
            if worker.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("the worker did not start polling")
            await asyncio.sleep(0.05)
        await asyncio.sleep(SETTLE_S)
        run_before, ticks_before = cpu_seconds(worker.pid)
        await asyncio.sleep(seconds)  # the measured idle window
        run_after, ticks_after = cpu_seconds(worker.pid)
    finally:
        worker.terminate()
        worker.wait(timeout=15)
        await redis.aclose()
    return 100 * (run_after - run_before) / seconds, 100 * (ticks_after - ticks_before) / seconds


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--baseline-poll", type=float, default=0.02)
    args = parser.parse_args()
    database_url = await fresh_database(DB)
    shapes = {
        "as deployed": None,
        f"baseline: polling every {args.baseline_poll * 1000:.0f} ms": args.baseline_poll,
    }
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    print(f"idle window {args.seconds:.0f} s, cores={os.cpu_count()}, load average {load}")
    results: dict[str, list[float]] = {name: [] for name in shapes}
    for round_ in range(args.rounds):
        for name, poll in shapes.items():
            percent, by_ticks = await measure(database_url, poll, args.seconds)
            results[name].append(percent)
            print(
                f"round {round_ + 1}  {name:<32} worker CPU {percent:6.3f} %"
                f"  (/proc/<pid>/stat ticks: {by_ticks:.1f} %)"
            )
    median = {name: statistics.median(values) for name, values in results.items()}
    for name, value in median.items():
        print(f"median  {name:<32} worker CPU {value:6.3f} %")
    deployed, baseline = median.values()
    print(f"idle CPU deployed/baseline ratio: {deployed / baseline:.3f}")


if __name__ == "__main__":
    asyncio.run(main())
