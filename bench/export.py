"""Benchmark `!memory export` and `!memory show all` for a person with a long ledger.

    python -m bench.export [--rows 200000] [--memories 500] [--changes 2000] [--runs 3]

One database holds one person with ``--memories`` memories and ``--rows`` ledger rows, all
inserted by one ``INSERT … SELECT generate_series``: ``--changes`` of them adds and updates
with their before/after text, the rest reads (by reply, extraction, command, nightly) spread
over the last year, each listing ten memory ids, as a turn's reads do; and a second person
whose 4,000 changes of 10 KB each cannot fit in Discord's files (the refusal's cost). Each
command runs in a child process on the production wiring (``open_services``) against the
Discord fake served here, so the child's figures are the command's alone, after one warm-up
run of the same command (as in a worker that has run others): wall time, the
longest stall of its event loop (a 5 ms ticker's worst lateness; the same ticker over an idle
second of the same child is the machine's own noise), and with ``tracemalloc`` in one more
run the peak of Python allocations, besides the rise of the process's resident set. Then
LEDGER_READ_ROLLUP_DAYS's fold of every read is timed and the export measured again. Last,
the ratio of the export's time to a plain ``SELECT count(*)`` of the person's ledger rows,
measured in the same run."""

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
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import asyncpg

from app.config import Settings
from app.discord.fake import FakeDiscord
from bench._rig import asyncpg_dsn, bench_db, bench_redis_url, fresh_database, serve

DB = bench_db("_export")
REDIS_URL = bench_redis_url(15)
BOT_ID, PERSON, GUILD, CHANNEL = 1000, 7_100_001, 500, 300
TOO_BIG = 7_100_002  # whose changes cannot fit in Discord's files
TOKEN = "bench-gateway-token-7c1e3a5b9d2f4068"
READERS = ("reply", "extraction", "command", "nightly")
TRIGGERS = itertools.count(9_000_000)  # each command message its own (nonces differ)
WARM_UP = 1_000_000_000  # added to a trigger: the warm-up command's own


async def seed(
    dsn: str, *, person: int, memories: int, rows: int, changes: int, chars: int = 0
) -> None:
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
            person,
            memories,
        )
        first = await conn.fetchval("SELECT min(id) FROM memories WHERE user_id = $1", person)
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
                       'content', 'an earlier version of fact ' || n || repeat('b', $7),
                       'source', 'self')
                   END,
                   CASE WHEN n <= $3 THEN jsonb_build_object(
                       'id', $4 + (n - 1) % $2, 'user_id', CAST($1::bigint AS text),
                       'content', 'remembered fact number ' || n || repeat('a', $7),
                       'source', 'self')
                   ELSE (SELECT jsonb_agg($4 + (n + k) % $2) FROM generate_series(1, 10) AS k)
                   END,
                   now() - make_interval(mins => ($6 - n) * 3)
            FROM generate_series(1, $6) AS n
            """,
            person,
            memories,
            changes,
            first,
            list(READERS),
            rows,
            chars,
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


async def _stall_of(work: Any) -> tuple[float, float]:
    """(seconds ``work`` took, the ticker's worst lateness meanwhile)."""
    worst = [0.0]
    ticking = asyncio.create_task(_ticker(worst))
    await asyncio.sleep(0.02)
    started = time.perf_counter()
    await work
    seconds = time.perf_counter() - started
    ticking.cancel()
    return seconds, worst[0]


async def child(args: argparse.Namespace) -> None:
    from app.commands import memory  # after the parent's args: the child imports the app
    from app.commands.answer import InChannel
    from app.commands.invocation import Invocation
    from app.wiring import open_services
    from tests.support.queue import InMemoryQueue

    settings = Settings(
        database_url=args.database_url,
        redis_url=REDIS_URL,
        gateway_token=TOKEN,
        discord_bot_token="bench-bot-token",
        discord_bot_user_id=BOT_ID,
        discord_api_base=args.discord_url,
        _env_file=None,
    )
    async with open_services(settings, queue=InMemoryQueue()) as services:

        def command(trigger: int) -> Any:
            asker = Invocation(args.person, CHANNEL, GUILD, trigger, str(trigger))
            answer = InChannel(services.discord, asker)
            if args.child == "export":
                return memory.memory_export(services, asker, answer)
            return memory.memory_show(services, asker, answer, everything=True)

        await command(
            args.trigger + WARM_UP
        )  # a warm worker: statements compiled, modules imported
        _, idle_stall = await _stall_of(asyncio.sleep(1.0))
        rss_before = _rss_kib("VmRSS")
        if args.trace:
            tracemalloc.start()
        seconds, stall = await _stall_of(command(args.trigger))
        peak = tracemalloc.get_traced_memory()[1] if args.trace else 0
    figures = {
        "seconds": seconds,
        "stall": stall,
        "idle_stall": idle_stall,
        "traced_peak": peak,
        "rss_rise_kib": _rss_kib("VmHWM") - rss_before,
    }
    print(json.dumps(figures))


@dataclass(frozen=True)
class Rig:
    url: str
    discord: FakeDiscord
    discord_url: str

    def run_child(self, command: str, person: int, *, trace: bool) -> Any:
        argv = [sys.executable, "-m", "bench.export", "--child", command]
        argv += ["--database-url", self.url, "--discord-url", self.discord_url]
        argv += ["--person", str(person), "--trigger", str(next(TRIGGERS))]
        if trace:
            argv.append("--trace")
        done = subprocess.run(argv, check=True, capture_output=True, text=True)
        return json.loads(done.stdout.strip().splitlines()[-1])


# --- the parent ------------------------------------------------------------------------------


def _mib(n: float) -> str:
    return f"{n / 1024 / 1024:.2f} MiB"


async def measure(rig: Rig, command: str, person: int, runs: int) -> dict[str, Any]:
    last_upload = max(rig.discord.uploads, default=0)
    timed = [
        await asyncio.to_thread(rig.run_child, command, person, trace=False) for _ in range(runs)
    ]
    files = [len(raw) for n, raw in rig.discord.uploads.items() if n > last_upload]
    traced = await asyncio.to_thread(rig.run_child, command, person, trace=True)
    return {
        "seconds": statistics.median(t["seconds"] for t in timed),
        "stall": max(t["stall"] for t in timed),
        "idle_stall": max(t["idle_stall"] for t in timed),
        "rss_rise_kib": statistics.median(t["rss_rise_kib"] for t in timed),
        "traced_peak": traced["traced_peak"],
        "files_per_run": len(files) / (2 * runs),  # each child runs it twice (warm-up)
        "largest_file": max(files, default=0),
        "answer": rig.discord.texts_in(CHANNEL)[-1],
    }


def report(name: str, figures: dict[str, Any]) -> None:
    print(
        f"{name:<22} median {figures['seconds'] * 1000:7.0f} ms   longest loop stall "
        f"{figures['stall'] * 1000:5.0f} ms (idle: {figures['idle_stall'] * 1000:.0f} ms)   "
        f"peak Python allocations {_mib(figures['traced_peak'])}   resident set rise "
        f"{_mib(figures['rss_rise_kib'] * 1024)}"
    )
    print(
        f"{'':<22} files per run {figures['files_per_run']:.1f}, largest "
        f"{_mib(figures['largest_file'])}; answer: {figures['answer'][:70]!r}"
    )


async def roll_up_everything(url: str) -> tuple[float, int]:
    """LEDGER_READ_ROLLUP_DAYS's fold, with every read old enough: (seconds, reads folded)."""
    from app.db import create_engine, create_session_factory
    from app.kit.clock import utcnow
    from app.memory.ledger_retention import roll_up_old_reads

    engine = create_engine(url)
    try:
        started = time.perf_counter()
        folded = await roll_up_old_reads(
            create_session_factory(engine), days=1, now=utcnow() + timedelta(days=2)
        )
        return time.perf_counter() - started, folded
    finally:
        await engine.dispose()


async def main(args: argparse.Namespace) -> None:
    url = await fresh_database(DB)
    dsn = asyncpg_dsn(DB)
    started = time.perf_counter()
    await seed(dsn, person=PERSON, memories=args.memories, rows=args.rows, changes=args.changes)
    seeded = time.perf_counter() - started
    await seed(dsn, person=TOO_BIG, memories=50, rows=4_000, changes=4_000, chars=5_000)
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    print(
        f"one person: {args.memories} memories, {args.rows} ledger rows ({args.changes} "
        f"changes, the rest reads), seeded in {seeded:.1f} s; another with 4,000 changes of "
        f"10 KB; cores={os.cpu_count()} load average {load}"
    )
    discord = FakeDiscord(bot_user_id=BOT_ID, token="bench-bot-token")
    async with serve(discord.app) as discord_url:
        rig = Rig(url, discord, discord_url)
        baseline = await count_baseline(dsn)
        print(f"{'SELECT count(*)':<22} median {baseline * 1000:7.1f} ms (the baseline)")
        export = await measure(rig, "export", PERSON, args.runs)
        report("!memory export", export)
        report("!memory show all", await measure(rig, "show-all", PERSON, args.runs))
        report("export, too large", await measure(rig, "export", TOO_BIG, args.runs))
        seconds, folded = await roll_up_everything(url)
        print(f"{'read rollup':<22} {folded} reads folded into counts in {seconds * 1000:.0f} ms")
        report("export after rollup", await measure(rig, "export", PERSON, args.runs))
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
    parser.add_argument("--person", type=int, default=PERSON)
    parser.add_argument("--trigger", type=int, default=1)
    parser.add_argument("--trace", action="store_true")
    return parser.parse_args()


if __name__ == "__main__":
    arguments = parse()
    asyncio.run(child(arguments) if arguments.child else main(arguments))
