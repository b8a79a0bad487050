"""Benchmark `!memory export` and `!memory show all` for a person with a long ledger.

    python -m bench.export [--rows 200000] [--memories 500] [--changes 2000] [--runs 3]

One database holds one person with ``--memories`` memories and ``--rows`` ledger rows, all
inserted by one ``INSERT … SELECT generate_series``: ``--changes`` of them adds and updates
with their before/after text, the rest reads (by reply, extraction, command, nightly) spread
over twelve months, each listing ten memory ids, as a turn's reads do. Each command runs in a
child process on the production wiring (``open_services``) against the Discord fake served
here, so the child's figures are the command's alone: wall time, the longest stall of its
event loop (a 5 ms ticker's worst lateness), and with ``tracemalloc`` in one more run the peak
of Python allocations and the rise of the process's resident set. Prints the files the fake
received and last the ratio of the export's time to a plain ``SELECT count(*)`` of the
person's ledger rows, measured in the same run."""

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
import tracemalloc
from pathlib import Path
from typing import Any

import asyncpg

from app.config import Settings
from app.discord.fake import FakeDiscord
from bench._rig import asyncpg_dsn, bench_db, bench_redis_url, fresh_database, serve

DB = bench_db("_export")
REDIS_URL = bench_redis_url(15)
BOT_ID, PERSON, GUILD, CHANNEL = 1000, 7_100_001, 500, 300
TOKEN = "bench-gateway-token-7c1e3a5b9d2f4068"
READERS = ("reply", "extraction", "command", "nightly")
TRIGGERS = itertools.count(9_000_000)  # each command message its own (nonces differ)


async def seed(dsn: str, *, memories: int, rows: int, changes: int) -> None:
    """The person's memories, then their ledger in one statement: row n is a change for
    n <= changes (an add of each memory first, then updates), else a read."""
    conn = await asyncpg.connect(dsn)
    try:
        await conn.execute(
            """
            INSERT INTO memories (user_id, content, created_at, updated_at)
            SELECT $1, 'remembered fact number ' || n || ' about this person, with some detail',
                   now() - make_interval(days => n % 365), now() - make_interval(hours => n)
            FROM generate_series(1, $2) AS n
            """,
            PERSON,
            memories,
        )
        first = await conn.fetchval("SELECT min(id) FROM memories WHERE user_id = $1", PERSON)
        await conn.execute(
            """
            INSERT INTO memory_log (memory_id, user_id, actor, action, reason, before, after,
                                    created_at)
            SELECT CASE WHEN n <= $3 THEN $4 + (n - 1) % $2 END,
                   $1::bigint,
                   CASE WHEN n <= $3 THEN 'extraction' ELSE ($5::text[])[1 + n % 4] END,
                   CASE WHEN n <= $2 THEN 'add' WHEN n <= $3 THEN 'update' ELSE 'read' END,
                   CASE WHEN n <= $3 THEN 'write path' ELSE 'reply prompt' END,
                   CASE WHEN n > $2 AND n <= $3 THEN jsonb_build_object(
                       'id', $4 + (n - 1) % $2, 'user_id', CAST($1::bigint AS text),
                       'content', 'an earlier version of fact ' || n, 'source', 'self')
                   END,
                   CASE WHEN n <= $3 THEN jsonb_build_object(
                       'id', $4 + (n - 1) % $2, 'user_id', CAST($1::bigint AS text),
                       'content', 'remembered fact number ' || n || ' about this person',
                       'source', 'self')
                   ELSE (SELECT jsonb_agg($4 + (n + k) % $2) FROM generate_series(1, 10) AS k)
                   END,
                   now() - make_interval(mins => ($6 - n) * 3)
            FROM generate_series(1, $6) AS n
            """,
            PERSON,
            memories,
            changes,
            first,
            list(READERS),
            rows,
        )
        await conn.execute("ANALYZE")
    finally:
        await conn.close()


async def count_baseline(dsn: str, runs: int = 5) -> float:
    """The median time of a plain count of the person's ledger rows."""
    conn = await asyncpg.connect(dsn)
    try:
        samples = []
        for _ in range(runs):
            started = time.perf_counter()
            await conn.fetchval("SELECT count(*) FROM memory_log WHERE user_id = $1", PERSON)
            samples.append(time.perf_counter() - started)
        return statistics.median(samples)
    finally:
        await conn.close()


# --- the child: one command, measured from inside ------------------------------------------


def _rss_kib(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    return 0


async def _ticker(worst: list[float], period: float = 0.005) -> None:
    while True:
        before = time.perf_counter()
        await asyncio.sleep(period)
        worst[0] = max(worst[0], time.perf_counter() - before - period)


async def child(args: argparse.Namespace) -> None:
    from app.commands import memory  # after the parent's args: the child imports the app
    from app.wiring import open_services
    from bench.memory import NoQueue

    settings = Settings(
        database_url=args.database_url,
        redis_url=REDIS_URL,
        gateway_token=TOKEN,  # type: ignore[arg-type]
        discord_bot_token="bench-bot-token",  # type: ignore[arg-type]
        discord_bot_user_id=BOT_ID,
        discord_api_base=args.discord_url,
        _env_file=None,  # type: ignore[call-arg]
    )
    async with open_services(settings, queue=NoQueue()) as services:
        asker = memory.Asker(PERSON, CHANNEL, GUILD, args.trigger)
        command = (
            memory.memory_export(services, asker)
            if args.child == "export"
            else memory.memory_show(services, asker, everything=True)
        )
        rss_before = _rss_kib("VmRSS")
        if args.trace:
            tracemalloc.start()
        worst = [0.0]
        ticking = asyncio.create_task(_ticker(worst))
        await asyncio.sleep(0.02)
        started = time.perf_counter()
        await command
        seconds = time.perf_counter() - started
        ticking.cancel()
        peak = tracemalloc.get_traced_memory()[1] if args.trace else 0
    figures = {
        "seconds": seconds,
        "stall": worst[0],
        "traced_peak": peak,
        "rss_rise_kib": _rss_kib("VmHWM") - rss_before,
    }
    print(json.dumps(figures))


def run_child(url: str, discord_url: str, command: str, trigger: int, *, trace: bool) -> Any:
    argv = [sys.executable, "-m", "bench.export", "--child", command]
    argv += ["--database-url", url, "--discord-url", discord_url, "--trigger", str(trigger)]
    if trace:
        argv.append("--trace")
    done = subprocess.run(argv, check=True, capture_output=True, text=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


# --- the parent ------------------------------------------------------------------------------


def _mib(n: float) -> str:
    return f"{n / 1024 / 1024:.1f} MiB"


def sent_files(discord: FakeDiscord, since: int) -> list[int]:
    return [len(raw) for _, raw in sorted(discord.uploads.items()) if _ > since]


async def measure(
    url: str, discord: FakeDiscord, discord_url: str, command: str, runs: int
) -> dict[str, Any]:
    timed = []
    last_upload = max(discord.uploads, default=0)
    for _ in range(runs):
        timed.append(
            await asyncio.to_thread(
                run_child, url, discord_url, command, next(TRIGGERS), trace=False
            )
        )
    files = sent_files(discord, last_upload)
    traced = await asyncio.to_thread(
        run_child, url, discord_url, command, next(TRIGGERS), trace=True
    )
    return {
        "seconds": statistics.median(t["seconds"] for t in timed),
        "stall": max(t["stall"] for t in timed),
        "rss_rise_kib": statistics.median(t["rss_rise_kib"] for t in timed),
        "traced_peak": traced["traced_peak"],
        "files_per_run": len(files) / runs if runs else 0,
        "largest_file": max(files, default=0),
        "answers": discord.texts_in(CHANNEL)[-1:],
    }


def report(name: str, figures: dict[str, Any]) -> None:
    print(
        f"{name:<16} median {figures['seconds'] * 1000:8.0f} ms   longest loop stall "
        f"{figures['stall'] * 1000:7.0f} ms   peak Python allocations "
        f"{_mib(figures['traced_peak'])}   resident set rise "
        f"{_mib(figures['rss_rise_kib'] * 1024)}"
    )
    print(
        f"{'':<16} files per run {figures['files_per_run']:.1f}, largest "
        f"{_mib(figures['largest_file'])}; channel answer: {figures['answers']}"
    )


async def main(args: argparse.Namespace) -> None:
    url = await fresh_database(DB)
    dsn = asyncpg_dsn(DB)
    started = time.perf_counter()
    await seed(dsn, memories=args.memories, rows=args.rows, changes=args.changes)
    seeded = time.perf_counter() - started
    discord = FakeDiscord(bot_user_id=BOT_ID, token="bench-bot-token")
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    print(
        f"one person: {args.memories} memories, {args.rows} ledger rows ({args.changes} "
        f"changes, the rest reads), seeded in {seeded:.1f} s; cores={os.cpu_count()} "
        f"load average {load}"
    )
    async with serve(discord.app) as discord_url:
        baseline = await count_baseline(dsn)
        export = await measure(url, discord, discord_url, "export", args.runs)
        show_all = await measure(url, discord, discord_url, "show-all", args.runs)
    print(f"{'SELECT count(*)':<16} median {baseline * 1000:8.1f} ms (the baseline)")
    report("!memory export", export)
    report("!memory show all", show_all)
    print(f"export / count = {export['seconds'] / baseline:.0f}x")


def parse() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--memories", type=int, default=500)
    parser.add_argument("--changes", type=int, default=2_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--child", choices=["export", "show-all"])
    parser.add_argument("--database-url")
    parser.add_argument("--discord-url")
    parser.add_argument("--trigger", type=int, default=1)
    parser.add_argument("--trace", action="store_true")
    return parser.parse_args()


if __name__ == "__main__":
    arguments = parse()
    asyncio.run(child(arguments) if arguments.child else main(arguments))
