"""Benchmark the turn's two reads as the tables grow from 10⁴ to 10⁶ rows.

    python -m bench.context [--small 10000] [--large 1000000] [--reads 1000]

The context read is ``channel_log.recent_messages`` (the last 20 live messages of a channel)
and the memory read is ``store.recent`` (up to ten of a person's memories by
updated_at, what recall runs per person). At each size both tables are bulk-loaded with
INSERT … SELECT generate_series into a fresh migrated database, as years of traffic would lay
them out: messages interleaved over 200 channels in time order (2 % deleted), memories over
max(500, rows/100) people rewritten at random times. Each read is timed warm, many times, at
random channels and people, two ways: the app function in its own session as the turn calls
it, its exact SQL alone on one connection, and Postgres's own execution time. Prints
p50/p95 per size, the plans (is the index used?), and last the worse of the two reads'
large/small p50 ratio for the app call."""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import asyncpg
from sqlalchemy import event
from sqlalchemy.ext.asyncio import AsyncEngine

from app.channel.store import recent_messages
from app.db import SessionFactory, create_engine, create_session_factory, unit_of_work
from app.memory import store
from app.memory.records import Why
from app.vocabulary import Actor
from bench._rig import Summary, asyncpg_dsn, bench_db, fresh_database

DB = bench_db("_context")
CHANNELS = 200
SERVER_SAMPLES = 20  # per block: EXPLAIN ANALYZE runs, for the server-side time
INDEXES = {"messages": "ix_messages_channel_recent", "memories": "ix_memories_user_recent"}

_LOAD_MESSAGES = """
    INSERT INTO messages (id, channel_id, guild_id, author_id, author_name, is_bot, content,
                          created_at, deleted_at)
    SELECT i, 1 + i % $2, 500, 10000 + (i * 7919) % 3000, 'user ' || (i * 7919) % 3000,
           i % 5 = 0,
           'message ' || i || ' ' || repeat(md5(i::text), (1 + i % 4)::int),
           now() - make_interval(secs => ($1 - i) * 30),
           CASE WHEN i % 50 = 7 THEN now() ELSE NULL END
    FROM generate_series(1, $1::bigint) AS i
"""
_LOAD_MEMORIES = """
    INSERT INTO memories (user_id, content, created_at, updated_at)
    SELECT 10000 + i % $2,
           'fact ' || i || ': ' || repeat(md5(i::text), (1 + i % 3)::int),
           now() - make_interval(days => 400),
           now() - make_interval(secs => (abs(hashtext(i::text)) % 31536000))
    FROM generate_series(1, $1::bigint) AS i
"""


WAYS = (("app", "app call"), ("sql", "SQL alone"), ("server", "in Postgres"))


@dataclass(frozen=True)
class Read:
    name: str
    table: str
    call: Callable[[SessionFactory, int], Awaitable[Any]]


async def _context(sessions: SessionFactory, channel_id: int) -> Any:
    async with sessions() as session:
        return await recent_messages(session, channel_id)


async def _memories(sessions: SessionFactory, user_id: int) -> Any:
    # As the reply path reads them: under the owner's lock, the read logged and committed.
    async with unit_of_work(sessions) as session:
        return await store.recent(session, user_id, Why(Actor.REPLY, "recall"))


READS = (
    Read("context read (last 20 of a channel)", "messages", _context),
    Read("memory read (ten newest of a person)", "memories", _memories),
)


def people(rows: int) -> int:
    return max(500, rows // 100)


async def load(conn: asyncpg.Connection, rows: int) -> float:
    started = time.monotonic()
    await conn.execute("TRUNCATE messages, memories RESTART IDENTITY")
    await conn.execute(_LOAD_MESSAGES, rows, CHANNELS)
    await conn.execute(_LOAD_MEMORIES, rows, people(rows))
    await conn.execute("VACUUM ANALYZE messages")
    await conn.execute("VACUUM ANALYZE memories")
    return time.monotonic() - started


def keys_for(read: Read, rows: int, count: int, rng: random.Random) -> list[int]:
    """Random channel ids (1…200) or person ids (10000…), as the loads assign them."""
    if read.table == "messages":
        return [1 + rng.randrange(CHANNELS) for _ in range(count)]
    return [10000 + rng.randrange(people(rows)) for _ in range(count)]


class Capture:
    """The SQL and parameters the app sends, so the same statement can be timed and
    EXPLAINed on its own."""

    def __init__(self, engine: AsyncEngine) -> None:
        self.statement = ""
        self.parameters: tuple[Any, ...] = ()
        event.listen(engine.sync_engine, "before_cursor_execute", self._seen)

    def _seen(self, conn: Any, cursor: Any, statement: str, parameters: Any, *_: Any) -> None:
        self.statement, self.parameters = statement, tuple(parameters)


async def time_app(read: Read, sessions: SessionFactory, keys: list[int]) -> list[float]:
    samples = []
    for key in keys:
        started = time.perf_counter()
        await read.call(sessions, key)
        samples.append(time.perf_counter() - started)
    return samples


async def time_sql(
    conn: asyncpg.Connection, statement: str, template: tuple[Any, ...], keys: list[int]
) -> list[float]:
    """The app's statement with only its key (the first parameter) changed."""
    prepared = await conn.prepare(statement)
    samples = []
    for key in keys:
        started = time.perf_counter()
        await prepared.fetch(key, *template[1:])
        samples.append(time.perf_counter() - started)
    return samples


async def server_times(
    conn: asyncpg.Connection, statement: str, template: tuple[Any, ...], keys: list[int]
) -> list[float]:
    """Postgres's own execution time of the statement (EXPLAIN ANALYZE), without the client
    and the loopback, which dominate a sub-millisecond read."""
    samples = []
    for key in keys:
        raw = await conn.fetchval("EXPLAIN (ANALYZE, FORMAT JSON) " + statement, key, *template[1:])
        plan = json.loads(raw) if isinstance(raw, str) else raw
        samples.append(float(plan[0]["Execution Time"]) / 1000)
    return samples


async def explain(
    conn: asyncpg.Connection, statement: str, parameters: tuple[Any, ...]
) -> list[str]:
    rows = await conn.fetch("EXPLAIN (ANALYZE, BUFFERS, COSTS OFF) " + statement, *parameters)
    return [str(row[0]) for row in rows]


class Size:
    """One database loaded to ``rows``: the app's engine on it and a raw connection."""

    def __init__(self, rows: int, db: str) -> None:
        self.rows = rows
        self.db = db
        self.samples: dict[tuple[str, str], list[float]] = {}

    async def open(self) -> None:
        url = await fresh_database(self.db)
        self.engine = create_engine(url, pool_size=2)
        self.sessions = create_session_factory(self.engine)
        self.capture = Capture(self.engine)
        self.conn = await asyncpg.connect(asyncpg_dsn(self.db))
        seconds = await load(self.conn, self.rows)
        print(
            f"{self.db}: {self.rows:,} rows in messages and in memories ({CHANNELS} channels, "
            f"{people(self.rows):,} people), loaded + VACUUM ANALYZE in {seconds:.1f} s"
        )

    async def close(self) -> None:
        await self.conn.close()
        await self.engine.dispose()

    async def statement_of(self, read: Read) -> tuple[str, tuple[Any, ...]]:
        await read.call(self.sessions, keys_for(read, self.rows, 1, random.Random(0))[0])
        return self.capture.statement, self.capture.parameters

    async def block(self, read: Read, count: int, rng: random.Random) -> None:
        """``count`` app calls, then the same keys as SQL alone."""
        statement, template = await self.statement_of(read)
        keys = keys_for(read, self.rows, count, rng)
        self.samples.setdefault((read.name, "app"), []).extend(
            await time_app(read, self.sessions, keys)
        )
        self.samples.setdefault((read.name, "sql"), []).extend(
            await time_sql(self.conn, statement, template, keys)
        )
        self.samples.setdefault((read.name, "server"), []).extend(
            await server_times(self.conn, statement, template, keys[:SERVER_SAMPLES])
        )


async def run(sizes: list[Size], args: argparse.Namespace) -> None:
    """Warm each size, then alternate blocks between sizes so a busy machine's drift falls
    on both alike."""
    rng = random.Random(7)
    for read in READS:
        for size in sizes:
            await size.block(read, args.warmup, rng)
            size.samples.clear()
    rounds = 10
    for _ in range(rounds):
        for read in READS:
            for size in sizes:
                await size.block(read, max(1, args.reads // rounds), rng)


async def report(sizes: list[Size]) -> None:
    small, large = sizes
    for read in READS:
        print(f"\n{read.name}:")
        for size in sizes:
            for way, label in WAYS:
                summary = Summary(size.samples[(read.name, way)])
                print(summary.line(f"  {size.rows:>9,} rows, {label}", 30, micro=True))
        for size in sizes:
            statement, parameters = await size.statement_of(read)
            plan = await explain(size.conn, statement, parameters)
            used = any(INDEXES[read.table] in line for line in plan)
            print(
                f"  plan at {size.rows:,} rows: index {INDEXES[read.table]} used: "
                f"{'yes' if used else 'NO'}"
            )
            for line in plan:
                print(f"      {line}")
    print(f"\nlarge/small ({large.rows:,} / {small.rows:,} rows):")
    app_ratios = []
    for read in READS:
        for way, label in WAYS:
            a = Summary(small.samples[(read.name, way)])
            b = Summary(large.samples[(read.name, way)])
            if way == "app":
                app_ratios.append(b.p50 / a.p50)
            print(
                f"  {read.name:<38} {label:<12} p50 {b.p50 / a.p50:5.2f}   p95 {b.p95 / a.p95:5.2f}"
            )
    print(f"read as the turn calls it, large/small p50 ratio (worst of two): {max(app_ratios):.2f}")


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--small", type=int, default=10_000)
    parser.add_argument("--large", type=int, default=1_000_000)
    parser.add_argument("--reads", type=int, default=1000)
    parser.add_argument("--warmup", type=int, default=200)
    args = parser.parse_args()
    load_avg = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    print(
        f"reads={args.reads} per size (after {args.warmup} warm-up) cores={os.cpu_count()} "
        f"load average {load_avg}"
    )
    sizes = [Size(args.small, DB + "_small"), Size(args.large, DB + "_large")]
    try:
        for size in sizes:
            await size.open()
        await run(sizes, args)
        await report(sizes)
    finally:
        for size in sizes:
            if hasattr(size, "conn"):
                await size.close()


if __name__ == "__main__":
    asyncio.run(main())
