"""Shared rig for the latency benchmarks: a fresh migrated database, fakes on local ports,
and percentile summaries."""

from __future__ import annotations

import asyncio
import json
import os
import statistics
import subprocess
import sys
from collections.abc import Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import asyncpg
import httpx

from tests.support.frames import message_create
from tests.support.servers import serve as serve_app

PG = os.environ.get("BENCH_PG", "postgres@127.0.0.1:5433")
# Several people benchmark on one machine: BENCH_DB names the databases (each benchmark adds
# its own suffix) and BENCH_REDIS_URL the Redis database, so runs never share them.
DB_PREFIX = os.environ.get("BENCH_DB", "bot_bench")


def bench_db(suffix: str = "") -> str:
    """This benchmark's database name: ``BENCH_DB`` (default ``bot_bench``) plus ``suffix``."""
    return DB_PREFIX + suffix


def bench_redis_url(default_db: int) -> str:
    """``BENCH_REDIS_URL`` when set, else the local Redis's database ``default_db``."""
    return os.environ.get("BENCH_REDIS_URL", f"redis://127.0.0.1:6379/{default_db}")


def asyncpg_dsn(db: str) -> str:
    return f"postgresql://{PG}/{db}"


def database_url(db: str) -> str:
    return f"postgresql+asyncpg://{PG}/{db}"


async def fresh_database(db: str) -> str:
    """Drop and recreate ``db``, migrate it to head with alembic; return its DATABASE_URL."""
    conn = await asyncpg.connect(asyncpg_dsn("postgres"))
    try:
        await conn.execute(f'DROP DATABASE IF EXISTS "{db}" WITH (FORCE)')
        await conn.execute(f'CREATE DATABASE "{db}"')
    finally:
        await conn.close()
    return await migrated(db)


async def migrated(db: str) -> str:
    """``db`` migrated to head with alembic (a kept database made by an older revision gets
    the newer ones); return its DATABASE_URL."""
    url = database_url(db)
    await asyncio.to_thread(
        subprocess.run,
        [sys.executable, "-m", "alembic", "upgrade", "head"],
        check=True,
        env={**os.environ, "DATABASE_URL": url},
        capture_output=True,
    )
    return url


async def seed_memories(conn: asyncpg.Connection, speakers: list[int], count: int) -> None:
    """``count`` memories per speaker, one day apart, newest first by updated_at."""
    await conn.execute(
        """
        INSERT INTO memories (user_id, content, created_at, updated_at)
        SELECT u, 'remembered fact number ' || n || ' about this person',
               now() - make_interval(days => n), now() - make_interval(days => n)
        FROM unnest($1::bigint[]) AS u, generate_series(1, $2::int) AS n
        """,
        speakers,
        count,
    )


# A benchmark drives a few speakers far faster than any person could: the per-person rate
# limits (a turn or a command per person per minute) would refuse most of its load.
UNLIMITED = {"TURNS_PER_USER_PER_MINUTE": "1000000", "COMMANDS_PER_USER_PER_MINUTE": "1000000"}


def start_process(args: list[str], env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    """``python <args>`` with its output in ``log``."""
    with log.open("wb") as out:  # the child keeps its own copy of the descriptor
        return subprocess.Popen([sys.executable, *args], env=env, stdout=out, stderr=out)


async def wait_healthy(url: str, process: subprocess.Popen[bytes]) -> None:
    """Until the API at ``url`` answers /healthz (fails if its process exits first)."""
    async with httpx.AsyncClient() as client:
        for _ in range(400):
            if process.poll() is not None:
                raise RuntimeError("the API exited during start-up")
            try:
                if (await client.get(url + "/healthz")).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            await asyncio.sleep(0.05)
    raise RuntimeError("the API did not start")


def cpu_seconds(pid: int) -> tuple[float, float]:
    """CPU time of ``pid`` so far: (every thread's schedstat run time, stat's utime+stime)."""
    run_ns = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        run_ns += int((task / "schedstat").read_text().split()[0])
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    ticks = int(fields[11]) + int(fields[12])
    return run_ns / 1e9, ticks / os.sysconf("SC_CLK_TCK")


def serve(app: Any) -> AbstractAsyncContextManager[str]:
    """Serve a fake on a local port, exactly as the tests do."""
    return serve_app(app, lifespan="off")


@dataclass(frozen=True)
class Summary:
    """Latencies in seconds, reported in milliseconds."""

    samples: Sequence[float]

    def q(self, fraction: float) -> float:
        ordered = sorted(self.samples)
        return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))] * 1000

    @property
    def mean(self) -> float:
        return statistics.fmean(self.samples) * 1000

    @property
    def p50(self) -> float:
        return self.q(0.5)

    @property
    def p95(self) -> float:
        return self.q(0.95)

    def line(self, name: str, width: int = 34, *, micro: bool = False) -> str:
        scale, unit = (1000.0, "µs") if micro else (1.0, "ms")
        return (
            f"{name:<{width}} n={len(self.samples):<5} mean {self.mean * scale:8.2f} {unit}"
            f"   p50 {self.p50 * scale:8.2f} {unit}   p95 {self.p95 * scale:8.2f} {unit}"
        )


def mention_frame(
    *, message_id: int, channel_id: int, guild_id: int, speaker_id: int, username: str, text: str
) -> bytes:
    """A MESSAGE_CREATE gateway frame as the relay posts it: ``text`` from ``speaker_id``."""
    frame = message_create(
        content=text,
        message_id=message_id,
        channel_id=channel_id,
        guild_id=guild_id,
        author_id=speaker_id,
        author_name=username,
    )
    return json.dumps(frame).encode()
