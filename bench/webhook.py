"""Benchmark POST /webhook against two baselines measured in the same run.

    python -m bench.webhook [--requests 6000] [--concurrency 64] [--rounds 3]

Each server runs alone as its own uvicorn process (same settings) while a lean keep-alive
client sends unique, valid MESSAGE_CREATE frames as fast as they are answered (saturation).
Prints req/s and p50/p99 per round for the bare endpoint, the minimal durable handler (one
committed INSERT per request) and our webhook, the medians over the rounds, then the ratios
against the durable handler (latency and throughput); the last line is webhook/bare
throughput."""

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
from dataclasses import dataclass
from datetime import UTC, datetime

import asyncpg
import httpx
from redis.asyncio import Redis

from bench._http import Result, load
from bench._rig import PG, bench_db, bench_redis_url
from tests.support.frames import message_create
from tests.support.servers import free_port

DB = bench_db()
REDIS_URL = bench_redis_url(12)
TOKEN = "bench-gateway-token-5e7a9c1b3d2f4068"
PORT = int(os.environ.get("BENCH_PORT", "0")) or free_port()
BARE, DURABLE, WEBHOOK = "bare endpoint", "durable (commit/request)", "/webhook (group commit)"


def frame_bodies(total: int, prefix: int) -> Callable[[], bytes | None]:
    ids = itertools.count(prefix)
    now = datetime.now(UTC)
    remaining = itertools.count(total, -1)

    def next_body() -> bytes | None:
        if next(remaining) <= 0:
            return None
        mid = next(ids)
        frame = message_create(content=f"benchmark message {mid}", message_id=mid, timestamp=now)
        return json.dumps(frame).encode()

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
        BARE: "bench.apps:bare_app",
        DURABLE: "bench.apps:durable_app",
        WEBHOOK: os.environ.get("BENCH_WEBHOOK_APP", "app.main:app"),
    }
    print(f"requests={args.requests} concurrency={args.concurrency} cores={os.cpu_count()}")
    # Rounds interleave the servers, so drift on a shared machine hits all of them alike.
    results: dict[str, list[Result]] = {name: [] for name in servers}
    for round_ in range(args.rounds):
        for i, (name, target) in enumerate(servers.items()):
            offset = (round_ * len(servers) + i + 1) * 10**6
            result = await measure(name, target, args, base + offset)
            results[name].append(result)
            print(f"round {round_ + 1}  {result.line()}")
    medians = {name: Medians.of(rounds) for name, rounds in results.items()}
    for name, median in medians.items():
        print(f"median  {name:<28} {median.line()}")
    ours, durable, bare = medians[WEBHOOK], medians[DURABLE], medians[BARE]
    print(f"webhook/durable p50 ratio: {ours.p50 / durable.p50:.2f}")
    print(f"webhook/durable p99 ratio: {ours.p99 / durable.p99:.2f}")
    print(f"webhook/durable throughput ratio: {ours.rps / durable.rps:.2f}")
    print(f"webhook/bare throughput ratio: {ours.rps / bare.rps:.2f}")


@dataclass(frozen=True)
class Medians:
    """Each figure's median over the rounds (each taken separately)."""

    rps: float
    p50: float
    p99: float

    @classmethod
    def of(cls, rounds: list[Result]) -> Medians:
        return cls(
            rps=statistics.median(r.rps for r in rounds),
            p50=statistics.median(r.percentile(0.5) for r in rounds),
            p99=statistics.median(r.percentile(0.99) for r in rounds),
        )

    def line(self) -> str:
        return f"{self.rps:9.0f} req/s   p50 {self.p50:7.2f} ms   p99 {self.p99:7.2f} ms"


if __name__ == "__main__":
    asyncio.run(main())
