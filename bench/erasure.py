"""Benchmark erasures of active members in a big database, and what they do to /webhook.

    python -m bench.erasure [--messages 1000000] [--people 4] [--rate 60] [--baseline-s 30]

One database holds 10⁶ messages: for each of ``--people`` members their 10,000 (in 20
channels, 2,000 of them with their recorded frames) and 5,000 of other people's that name them
(by display name and by mention), and everyone else's; each member's 500 memories with their
ledger, and 20,000 observations. The API (`uvicorn app.main:app`) and the real worker run as
processes, with the fakes in this one. First /webhook is driven for ``--baseline-s`` seconds
at a steady ``--rate`` (reactions from other people, recorded and processed like any event)
and its latency measured; then the members are erased one after another (`POST
/users/{id}/erase`, followed to the end or ``--cap-s``) while the same load runs, so the window
holds enough samples for a p99. Prints each erasure's duration, the rows one erasure touched
per table (its receipt), and /webhook p50/p99 during the erasures against without, measured
in this run. Written against the admin API only, so the same file measures an earlier build
(whose erase answered 200 with the receipt once done, from inside the API)."""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from subprocess import Popen

import asyncpg
import httpx
from redis.asyncio import Redis

from app.decision.fake import FakeJev
from app.discord.fake import FakeDiscord
from bench._rig import (
    UNLIMITED,
    Summary,
    asyncpg_dsn,
    bench_db,
    bench_redis_url,
    fresh_database,
    serve,
    start_process,
    wait_healthy,
)
from tests.support.frames import reaction_add
from tests.support.servers import free_port

DB = bench_db("_erasure")
REDIS_URL = bench_redis_url(14)
TOKEN = "bench-gateway-token-5e7a9c1b3d2f4068"
ADMIN = "bench-admin-secret-2c4e6a8f0b1d3e5f"
BOT_ID, HER, GUILD = 1000, 7_000_001, 500
HERS, NAMING, MEMORIES, OBSERVATIONS, FRAMES = 10_000, 5_000, 500, 20_000, 2_000
OTHERS, CHANNELS = 5_000, 400


async def columns(conn: asyncpg.Connection, table: str) -> set[str]:
    rows = await conn.fetch(
        "SELECT column_name FROM information_schema.columns WHERE table_name = $1", table
    )
    return {row[0] for row in rows}


async def seed(dsn: str, total: int, people: int) -> None:
    """Everything in bulk SQL (generate_series), so a million rows take seconds."""
    conn = await asyncpg.connect(dsn)
    try:
        others = total - people * (HERS + NAMING)
        await conn.execute(
            """
            INSERT INTO messages (id, channel_id, guild_id, author_id, author_name, content,
                                  created_at)
            SELECT 10000000 + n, 100 + n % $2, $3, 8000000 + n % $4, 'member ' || n % $4,
                   'an ordinary line about the weather, number ' || n,
                   now() - make_interval(secs => n)
            FROM generate_series(1, $1) AS n
            """,
            others,
            CHANNELS,
            GUILD,
            OTHERS,
        )
        for person in range(people):
            await seed_person(conn, person)
        await conn.execute("ANALYZE")
    finally:
        await conn.close()


def person_id(person: int) -> int:
    return HER + person


async def seed_person(conn: asyncpg.Connection, person: int) -> None:
    """One active member: their messages, others' messages naming them, memories with
    their ledger, observations, recorded frames."""
    mentions = "mention_ids" in await columns(conn, "messages")
    extra = ", mention_ids" if mentions else ""
    own, naming = 20000000 + person * HERS, 30000000 + person * NAMING
    await conn.execute(
        """
        INSERT INTO messages (id, channel_id, guild_id, author_id, author_name, content,
                              created_at)
        SELECT $4 + n, 100 + n % 20, $2, $3, 'Quokka ' || $5::text,
               'I said this myself, line ' || n, now() - make_interval(mins => n)
        FROM generate_series(1, $1) AS n
        """,
        HERS,
        GUILD,
        person_id(person),
        own,
        str(person),
    )
    await conn.execute(
        f"""
        INSERT INTO messages (id, channel_id, guild_id, author_id, author_name, content,
                              created_at{extra})
        SELECT $5 + n, 100 + n % 20, $2, 8000000 + n % $4, 'member ' || n % $4,
               'Quokka said it first, ask <@' || ($3::bigint)::text || '> ' || n,
               now() - make_interval(mins => n){", ARRAY[$3::bigint]" if mentions else ""}
        FROM generate_series(1, $1) AS n
        """,
        NAMING,
        GUILD,
        person_id(person),
        OTHERS,
        naming,
    )
    await seed_memory(conn, person_id(person), own)
    await seed_frames(conn, person_id(person), own)


async def seed_memory(conn: asyncpg.Connection, user_id: int, own: int) -> None:
    await conn.execute(
        "INSERT INTO memories (user_id, content) "
        "SELECT $1, 'a fact she told, number ' || n FROM generate_series(1, $2) AS n",
        user_id,
        MEMORIES,
    )
    await conn.execute(
        """
        INSERT INTO memory_log (memory_id, user_id, actor, action, reason, after)
        SELECT id, user_id, 'extraction', 'add', 'seed', jsonb_build_object('content', content)
        FROM memories WHERE user_id = $1
        """,
        user_id,
    )
    await conn.execute(
        "INSERT INTO observations (channel_id, user_id, kind, message_id, content) "
        "SELECT 100 + n % 20, $1, 'message', $4 + n % $3, 'I said this myself' "
        "FROM generate_series(1, $2) AS n",
        user_id,
        OBSERVATIONS,
        HERS,
        own,
    )


async def seed_frames(conn: asyncpg.Connection, user_id: int, own: int) -> None:
    """Their newest messages' frames, as the webhook records them (with the identity
    columns where this build has them)."""
    identity = {"author_id", "message_id"} <= await columns(conn, "inbox")
    extra = ", author_id, channel_id, message_id" if identity else ""
    values = ", $1, 100 + n % 20, $3 + n" if identity else ""
    await conn.execute(
        f"""
        INSERT INTO inbox (id, event_type, payload, handled_at{extra})
        SELECT ($3 + n)::text, 'MESSAGE_CREATE', jsonb_build_object(
                   'op', 0, 't', 'MESSAGE_CREATE', 'd', jsonb_build_object(
                       'id', ($3 + n)::text, 'channel_id', (100 + n % 20)::text,
                       'author', jsonb_build_object(
                           'id', ($1::bigint)::text, 'username', 'quokka_a'),
                       'content', 'I said this myself, line ' || n,
                       'timestamp', now())),
               now(){values}
        FROM generate_series(1, $2) AS n
        """,
        user_id,
        FRAMES,
        own,
    )


@dataclass
class Paced:
    """Webhook latencies of a steady load, and the statuses seen."""

    latencies: list[float] = field(default_factory=list)
    statuses: dict[int, int] = field(default_factory=dict)


async def paced_load(api: str, rate: float, until: asyncio.Event, clients: int = 4) -> Paced:
    """``rate`` requests per second, spread over ``clients`` keep-alive connections, until
    ``until`` is set. Each request is a reaction frame from another member (unique)."""
    result = Paced()
    counter = itertools.count(1)
    interval = clients / rate

    async def client(lane: int) -> None:
        async with httpx.AsyncClient(base_url=api, timeout=30) as http:
            next_at = time.perf_counter() + lane * interval / clients
            while not until.is_set():
                n = next(counter)
                reaction = reaction_add(
                    message_id=10000000 + n,
                    user_id=8000000 + n % OTHERS,
                    channel_id=100 + n % CHANNELS,
                    guild_id=GUILD,
                )
                body = {**reaction, "s": n}  # its own place in the session: a new event
                started = time.perf_counter()
                response = await http.post(
                    "/webhook",
                    content=json.dumps(body),
                    headers={"x-discord-gateway-token": TOKEN, "x-discord-gateway-session": "b"},
                )
                result.latencies.append(time.perf_counter() - started)
                result.statuses[response.status_code] = (
                    result.statuses.get(response.status_code, 0) + 1
                )
                next_at += interval
                # Pacing the load (a steady arrival rate), not waiting on a condition.
                await asyncio.sleep(max(0.0, next_at - time.perf_counter()))

    await asyncio.gather(*(client(n) for n in range(clients)))
    return result


async def erase(
    api: str, user_id: int, cap_s: float
) -> tuple[float | None, dict[str, int] | None, str]:
    """Start one erasure and follow it to the end: (seconds, receipt, how it ended)."""
    headers = {"Authorization": f"Bearer {ADMIN}"}
    started = time.perf_counter()
    async with httpx.AsyncClient(base_url=api, headers=headers, timeout=cap_s) as admin:
        try:
            answer = await admin.post(f"/users/{user_id}/erase")
        except httpx.HTTPError as exc:
            return None, None, f"the erase request failed: {type(exc).__name__}"
        if answer.status_code == 200:  # an earlier build: synchronous, in the API
            return time.perf_counter() - started, answer.json(), "done (answered in the API)"
        if answer.status_code != 202:
            return None, None, f"the erase request answered {answer.status_code}"
        erasure_id = answer.json()["erasureId"]
        while time.perf_counter() - started < cap_s:
            status = (await admin.get(f"/erasures/{erasure_id}")).json()
            if status["status"] != "running":
                return time.perf_counter() - started, status["receipt"], status["status"]
            await asyncio.sleep(0.2)  # polling the status endpoint, as an operator would
    return None, None, f"not done after {cap_s:.0f} s"


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--messages", type=int, default=1_000_000)
    parser.add_argument("--rate", type=float, default=60.0)
    parser.add_argument("--baseline-s", type=float, default=30.0)
    parser.add_argument("--cap-s", type=float, default=600.0)
    parser.add_argument("--people", type=int, default=4, help="erased one after another")
    args = parser.parse_args()

    database_url = await fresh_database(DB)
    loaded = time.perf_counter()
    await seed(asyncpg_dsn(DB), args.messages, args.people)
    print(f"seeded {args.messages:,} messages in {time.perf_counter() - loaded:.1f} s")
    redis = Redis.from_url(REDIS_URL)
    await redis.flushdb()
    await redis.aclose()
    discord, jev = FakeDiscord(bot_user_id=BOT_ID), FakeJev()
    logs = Path(tempfile.mkdtemp(prefix="bench-erasure-"))
    async with serve(discord.app) as discord_url, serve(jev.app) as jev_url:
        env = {
            **os.environ,
            **UNLIMITED,
            "DATABASE_URL": database_url,
            "REDIS_URL": REDIS_URL,
            "GATEWAY_TOKEN": TOKEN,
            "ADMIN_SECRET": ADMIN,
            "DISCORD_BOT_TOKEN": discord.token,
            "DISCORD_API_BASE": discord_url,
            "DISCORD_BOT_USER_ID": str(BOT_ID),
            "JEV_URL": jev_url,
            "JEV_API_KEY": "bench-jev-key",
            "ANTHROPIC_API_KEY": "bench-anthropic-key",
            "MEMORY_CONSOLIDATE_EVERY": "1000000",
        }
        port = free_port()
        processes: list[Popen[bytes]] = []
        try:
            api_args = ["-m", "uvicorn", "app.main:app", "--port", str(port)]
            api_args += ["--no-access-log", "--log-level", "warning"]
            processes.append(start_process(api_args, env, logs / "api.log"))
            api = f"http://127.0.0.1:{port}"
            await wait_healthy(api, processes[0])
            worker_env = {**env, "WORKER_METRICS_PORT": str(free_port())}
            processes.append(start_process(["-m", "bench._worker"], worker_env, logs / "w.log"))
            await run(api, args)
        finally:
            for process in processes:
                process.terminate()
            for process in processes:
                process.wait(timeout=30)
    print(f"logs: {logs}")


async def run(api: str, args: argparse.Namespace) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    loop.call_later(args.baseline_s, stop.set)
    without = await paced_load(api, args.rate, stop)
    stop = asyncio.Event()
    load = asyncio.create_task(paced_load(api, args.rate, stop))
    erased = [await erase(api, person_id(p), args.cap_s) for p in range(args.people)]
    stop.set()
    during = await load
    report(erased, without, during)


def report(
    erased: list[tuple[float | None, dict[str, int] | None, str]], without: Paced, during: Paced
) -> None:
    print(f"\n{len(erased)} erasures, one after another (each of the same profile):")
    for seconds, _, ended in erased:
        print(f"  {ended}, {seconds:.1f} s" if seconds is not None else f"  {ended}")
    receipt = next((r for _, r, _ in erased if r), None) or {}
    print("rows touched by one erasure:")
    for table, count in sorted(receipt.items()):
        if isinstance(count, int) and count:
            print(f"  {table:<24} {count:>8,}")
    base, under = Summary(without.latencies), Summary(during.latencies)
    print(
        f"\n{'/webhook without erasure':<30} n={len(base.samples):<6} p50 {base.p50:7.2f} ms "
        f"  p99 {base.q(0.99):7.2f} ms   statuses {without.statuses}"
    )
    print(
        f"{'/webhook during erasure':<30} n={len(under.samples):<6} p50 {under.p50:7.2f} ms "
        f"  p99 {under.q(0.99):7.2f} ms   statuses {during.statuses}"
    )
    print(f"\np99 during / without: {under.q(0.99) / base.q(0.99):.2f}x")


if __name__ == "__main__":
    asyncio.run(main())
