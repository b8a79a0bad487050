"""What the limits and the usage accounting add to a turn.

    python -m bench.limits [--people 2000] [--days 30] [--samples 2000]

Seeds ``model_usage`` as a month of a busy deployment would leave it (``--people`` people a
day over ``--days`` JST days, six purposes each, in two guilds) into a fresh migrated
database, then times, warm and at random people: the rate-limit check (one Lua script on
Redis), the daily budget read (a person's cap: one small query; a guild's: a sum over the
guild's day, which each worker caches for 30 s; both, as a turn sees them) and a job's usage write
(four rows upserted in one transaction, after the reply). The baseline is the cheapest round
trip of each store: a Redis PING and a ``SELECT 1`` in a session. Prints p50/p95 and last
the ratio of the turn's added cost (check + budget read) to the baseline, both p50."""

from __future__ import annotations

import argparse
import asyncio
import random
import time
from collections.abc import Awaitable, Callable
from datetime import date

import asyncpg
from redis.asyncio import Redis
from sqlalchemy import text

from app.db import create_engine, create_session_factory, unit_of_work
from app.kit.clock import jst_day, utcnow
from app.kit.spend import PurposeSpend, UsageKey
from app.kit.versioned import Unshared, VersionedCache
from app.usage import store
from app.usage.budget import over_budget
from app.usage.limiter import Limit, Limiter
from bench._rig import Summary, asyncpg_dsn, bench_db, bench_redis_url, fresh_database

DB = bench_db("_limits")
REDIS_URL = bench_redis_url(14)
PURPOSES = ("reply", "emoji_enough", "emoji_choice", "worth_keeping", "memory_text", "task")
GUILDS = (500, 501)

_SEED = """
    INSERT INTO model_usage (day, guild_id, user_id, purpose, calls, input_tokens, output_tokens)
    SELECT (now() AT TIME ZONE 'Asia/Tokyo')::date - d, ($3::bigint[])[1 + p % 2], 10000 + p,
           purpose, 1 + (p + d) % 9, 900 * (1 + (p + d) % 9), 120 * (1 + (p + d) % 9)
    FROM generate_series(0, $2::int - 1) AS d, generate_series(1, $1::int) AS p,
         unnest($4::text[]) AS purpose
"""


async def timed(samples: int, call: Callable[[int], Awaitable[object]]) -> Summary:
    for i in range(50):  # warm up
        await call(i)
    seconds = []
    for i in range(samples):
        started = time.perf_counter()
        await call(i)
        seconds.append(time.perf_counter() - started)
    return Summary(seconds)


async def main(people: int, days: int, samples: int) -> None:
    url = await fresh_database(DB)
    conn = await asyncpg.connect(asyncpg_dsn(DB))
    try:
        await conn.execute(_SEED, people, days, list(GUILDS), list(PURPOSES))
        await conn.execute("ANALYZE model_usage")
        rows = await conn.fetchval("SELECT count(*) FROM model_usage")
    finally:
        await conn.close()
    engine = create_engine(url)
    sessions = create_session_factory(engine)
    redis = Redis.from_url(REDIS_URL)
    await redis.flushdb()
    limiter = Limiter(redis)
    today = jst_day(utcnow())
    rng = random.Random(7)

    def someone() -> int:
        return 10000 + rng.randrange(1, people + 1)

    async def check(i: int) -> None:
        await limiter.admit(Limit.TURNS, someone(), f"event-{i}", 10)

    def budget(
        per_user: int | None, per_guild: int | None, ttl_s: float
    ) -> Callable[[int], Awaitable[None]]:
        cache: VersionedCache[tuple[date, int], int] = VersionedCache(Unshared(), ttl_s=ttl_s)

        async def read(_: int) -> None:
            async with sessions() as session:
                await over_budget(
                    session,
                    today,
                    user_id=someone(),
                    guild_id=rng.choice(GUILDS),
                    per_user=per_user,
                    per_guild=per_guild,
                    guild_tokens=cache,
                )

        return read

    async def write(_: int) -> None:
        person, guild = someone(), rng.choice(GUILDS)
        spent = {
            UsageKey(today, guild, person, p): PurposeSpend(1, 1000, 100) for p in PURPOSES[:4]
        }
        async with unit_of_work(sessions) as session:
            await store.add(session, spent)

    async def ping(_: int) -> None:
        await redis.ping()

    async def select_one(_: int) -> None:
        async with sessions() as session:
            await session.execute(text("SELECT 1"))

    try:
        figures = {
            "redis PING (baseline)": await timed(samples, ping),
            "SELECT 1 in a session (baseline)": await timed(samples, select_one),
            "rate-limit check (Lua)": await timed(samples, check),
            "budget read, person cap": await timed(samples, budget(200_000, None, 30)),
            "budget read, guild cap, uncached": await timed(samples, budget(None, 10**9, 0)),
            "budget read, both (cached guild)": await timed(samples, budget(200_000, 10**9, 30)),
            "usage write (4 rows, after reply)": await timed(samples, write),
        }
    finally:
        await redis.aclose()
        await engine.dispose()
    print(f"model_usage: {rows} rows ({people} people x {days} days x {len(PURPOSES)} purposes)")
    for name, summary in figures.items():
        print(summary.line(name, micro=True))
    added = figures["rate-limit check (Lua)"].p50 + figures["budget read, both (cached guild)"].p50
    baseline = (
        figures["redis PING (baseline)"].p50 + figures["SELECT 1 in a session (baseline)"].p50
    )
    print(f"turn's added cost / baseline round trips (p50): {added / baseline:.2f}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--people", type=int, default=2000)
    parser.add_argument("--days", type=int, default=30)
    parser.add_argument("--samples", type=int, default=2000)
    args = parser.parse_args()
    asyncio.run(main(args.people, args.days, args.samples))
