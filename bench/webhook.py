"""Benchmark POST /webhook against two baselines measured in the same run.

    python -m bench.webhook [--requests 6000] [--concurrency 64] [--rounds 3]

Each server runs alone as its own uvicorn process (same settings) while a lean keep-alive
client sends unique, valid MESSAGE_CREATE frames. Prints req/s and p50/p99 for the bare
endpoint, the minimal durable handler (one committed INSERT per request) and our webhook,
then the ratios; the last line is webhook/bare throughput."""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime

import asyncpg
import httpx
from redis.asyncio import Redis

from bench._http import Result, load
from bench._rig import PG, bench_db, bench_redis_url
from tests.support.servers import free_port

DB = bench_db()
REDIS_URL = bench_redis_url(12)
TOKEN = "bench-gateway-token-5e7a9c1b3d2f4068"
PORT = int(os.environ.get("BENCH_PORT", "0")) or free_port()


def frame_bodies(total: int, prefix: int) -> Callable[[], bytes | None]:
    ids = itertools.count(prefix)
    now = datetime.now(UTC).isoformat()
    remaining = itertools.count(total, -1)

    def next_body() -> bytes | None:
        if next(remaining) <= 0:
            return None
        mid = str(next(ids))
        return json.dumps(
            {
                "op": 0,
                "t": "MESSAGE_CREATE",
                "s": 1,
                "d": {
                    "id": mid,
                    "channel_id": "300",
                    "guild_id": "500",
                    "author": {"id": "2001", "username": "alice", "global_name": "Alice"},
                    "member": {"nick": None, "roles": []},
                    "content": "benchmark message " + mid,
                    "timestamp": now,
                    "mentions": [],
                },
            }
        ).encode()

    return next_body


async def prepare_database() -> None:
    conn = await asyncpg.connect(f"postgresql://{PG}/postgres")
    await conn.execute(f"DROP DATABASE IF EXISTS {DB} WITH (FORCE)")
    await conn.execute(f"CREATE DATABASE {DB}")
    await conn.close()
    env = {**os.environ, "DATABASE_URL": f"postgresql+asyncpg://{PG}/{DB}"}
    await asyncio.to_thread(
        subprocess.run,
        [sys.executable, "-m", "alembic", "upgrade", "head"],
        check=True,
        env=env,
        capture_output=True,
    )
    conn = await asyncpg.connect(f"postgresql://{PG}/{DB}")
    await conn.execute("CREATE TABLE bench_inbox (id text PRIMARY KEY, payload jsonb NOT NULL)")
    await conn.close()
    redis = Redis.from_url(REDIS_URL)
    await redis.flushdb()
    await redis.aclose()


def start_server(target: str) -> subprocess.Popen[bytes]:
    env = {
        **os.environ,
        "DATABASE_URL": f"postgresql+asyncpg://{PG}/{DB}",
        "BENCH_PG_DSN": f"postgresql://{PG}/{DB}",
        "REDIS_URL": REDIS_URL,
        "GATEWAY_TOKEN": TOKEN,
    }
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "uvicorn",
            target,
            "--port",
            str(PORT),
            "--no-access-log",
            "--log-level",
            "warning",
        ],
        env=env,
    )


async def wait_ready(url: str) -> None:
    async with httpx.AsyncClient() as client:
        for _ in range(200):
            try:
                if (await client.get(url + "/healthz")).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            await asyncio.sleep(0.05)
    raise RuntimeError(f"server at {url} did not start")


async def measure(name: str, target: str, args: argparse.Namespace, prefix: int) -> Result:
    server = start_server(target)
    url = f"http://127.0.0.1:{PORT}"
    try:
        await wait_ready(url)
        headers = {"x-discord-gateway-token": TOKEN}
        await load(
            "warm-up",
            url + "/webhook",
            bodies=frame_bodies(args.warmup, prefix),
            concurrency=args.concurrency,
            headers=headers,
        )
        return await load(
            name,
            url + "/webhook",
            bodies=frame_bodies(args.requests, prefix + args.warmup),
            concurrency=args.concurrency,
            headers=headers,
        )
    finally:
        server.terminate()
        server.wait(timeout=10)


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--requests", type=int, default=6000)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--warmup", type=int, default=500)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    await prepare_database()
    base = int(time.time() * 1000) << 22
    servers = {
        "bare endpoint": "bench.apps:bare_app",
        "durable (commit/request)": "bench.apps:durable_app",
        "/webhook (group commit)": "app.main:app",
    }
    print(f"requests={args.requests} concurrency={args.concurrency} cores={os.cpu_count()}")
    # Rounds interleave the servers, so drift on a shared machine hits all of them alike.
    rps: dict[str, list[float]] = {name: [] for name in servers}
    for round_ in range(args.rounds):
        for i, (name, target) in enumerate(servers.items()):
            offset = (round_ * len(servers) + i + 1) * 10**6
            result = await measure(name, target, args, base + offset)
            rps[name].append(result.rps)
            print(f"round {round_ + 1}  {result.line()}")
    median = {name: statistics.median(values) for name, values in rps.items()}
    for name, value in median.items():
        print(f"median  {name:<28} {value:9.0f} req/s")
    ours = median["/webhook (group commit)"]
    print(f"webhook/durable throughput ratio: {ours / median['durable (commit/request)']:.2f}")
    print(f"webhook/bare throughput ratio: {ours / median['bare endpoint']:.2f}")


if __name__ == "__main__":
    asyncio.run(main())
