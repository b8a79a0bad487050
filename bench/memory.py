"""Benchmark the memory write path (seed 000) with ten existing memories for the speaker.

    python -m bench.memory [--runs 30] [--warmup 3] [--updates 4] [--deletes 1]

``run_write_path`` runs in this process on the production wiring (``open_services``: the
decision client, the Anthropic SDK, a fresh migrated database); the decision service answers
in 50 ms and the model in 300 ms (local fakes). Each run is a new speaker with ten memories:
worth_keeping says yes, the ten verdicts ask for ``--updates`` rewrites and ``--deletes``
deletions, add_memory says yes, so the writer rewrites and adds concurrently and one locked
transaction applies it all. Critical path: worth_keeping 50 + verdicts in parallel 50 +
add 50 + writes in parallel 300 = 450 ms. Prints the figures, where the time goes, and last
the ratio of the mean to the critical path."""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
import re
import statistics
import time
from dataclasses import dataclass
from typing import Any

import asyncpg
import httpx

from app.channel.exchange import Exchange, Line
from app.chat.fake import Delay, FakeAnthropic, Text
from app.config import Settings
from app.decision.fake import FakeJev
from app.decision.vocabulary import Question
from app.decision.wire import request_body
from app.discord.fake import FakeDiscord
from app.memory.write_path import WriteOutcome, run_write_path
from app.vocabulary import Actor
from app.wiring import open_services
from bench._rig import Summary, asyncpg_dsn, bench_db, fresh_database, seed_memories, serve
from bench._taps import Hit, Tap
from tests.support.queue import InMemoryQueue

DB = bench_db("_memory")
BOT_ID = 1000
DECISION_S = 0.050
CHAT_S = 0.300
CRITICAL_S = DECISION_S * 3 + CHAT_S  # worth_keeping, verdicts ‖, add_memory, writes ‖
MEMORIES = 10
_FACT = re.compile(r"fact number (\d+) ")


@dataclass
class Timing:
    started: float
    worth: float  # arrival of worth_keeping at the decision service
    verdicts: float  # first verdict arrival
    add: float  # add_memory arrival
    writes: float  # first writer request arrival
    written: float  # last writer answer sent
    finished: float
    outcome: WriteOutcome

    @property
    def total(self) -> float:
        return self.finished - self.started


def verdict_for(updates: int, deletes: int) -> Any:
    """Memory k (1-based, as seeded) gets update for k ≤ updates, then delete, then keep."""

    def answer(body: dict[str, Any]) -> str:
        found = _FACT.search(str(body.get("prompt", "")))
        k = int(found.group(1)) if found else MEMORIES
        if k <= updates:
            return "update"
        return "delete" if k <= updates + deletes else "keep"

    return answer


def writer(counter: itertools.count[int]) -> Any:
    def respond(body: dict[str, Any]) -> Delay:
        fact = {"subject": "speaker", "fact": f"Alice now cooks dish {next(counter)} on Fridays"}
        return Delay(CHAT_S, Text(json.dumps(fact)))

    return respond


def exchange_for(speaker_id: int, marker: str) -> Exchange:
    lines = (
        Line(speaker_id, "Alice", False, f"{marker} I switched from pasta to curry on Fridays."),
        Line(BOT_ID, "companion", True, "Curry Fridays sound great!"),
        Line(speaker_id, "Alice", False, "And I stopped going to the Tuesday climbing class."),
    )
    return Exchange(speaker_id=speaker_id, speaker_name="Alice", lines=lines)


async def seed(speakers: list[int]) -> None:
    conn = await asyncpg.connect(asyncpg_dsn(DB))
    try:
        await seed_memories(conn, speakers, MEMORIES)
    finally:
        await conn.close()


def _question(hit: Hit) -> str:
    body = hit.json()
    return str(body.get("question")) if isinstance(body, dict) else ""


async def one_run(services: Any, jev: Tap, model: Tap, speaker_id: int, index: int) -> Timing:
    marker = f"[bench-memory-{index:05d}]"
    started = time.monotonic()
    outcome = await run_write_path(
        services, exchange_for(speaker_id, marker), actor=Actor.EXTRACTION, trigger=f"bench:{index}"
    )
    finished = time.monotonic()
    asked = [h for h in jev.hits if h.mentions(marker)]
    writes = [h for h in model.hits if h.mentions(marker)]

    def first(question: str) -> float:
        return min(h.arrived for h in asked if _question(h) == question)

    return Timing(
        started=started,
        worth=first("worth_keeping"),
        verdicts=first("memory_verdict"),
        add=first("add_memory"),
        writes=min(h.arrived for h in writes),
        written=max(h.finished or finished for h in writes),
        finished=finished,
        outcome=outcome,
    )


async def fake_floor(jev_url: str, model_url: str, verdicts: int, writes: int) -> float:
    """The critical path as the fakes alone deliver it to a client here: one decision, a
    parallel batch of verdicts, one decision, a parallel batch of writes (median of five)."""
    decide = request_body(Question.WORTH_KEEPING, "floor", None)
    message = {"model": "fake", "max_tokens": 16, "messages": [{"role": "user", "content": "x"}]}
    rounds = []
    async with httpx.AsyncClient() as client:

        async def call(url: str, body: dict[str, Any]) -> None:
            (await client.post(url, json=body)).raise_for_status()

        decision, chat = jev_url + "/v1/decide", model_url + "/v1/messages"
        for _ in range(5):
            started = time.monotonic()
            await call(decision, decide)
            await asyncio.gather(*(call(decision, decide) for _ in range(verdicts)))
            await call(decision, decide)
            await asyncio.gather(*(call(chat, message) for _ in range(writes)))
            rounds.append(time.monotonic() - started)
    return statistics.median(rounds)


def report(timings: list[Timing], args: argparse.Namespace, floor: float) -> None:
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    outcome = timings[0].outcome
    print(
        f"runs={len(timings)} warmup={args.warmup} memories={MEMORIES} cores={os.cpu_count()} "
        f"load average {load}"
    )
    print(
        f"each run: worth_keeping yes, {MEMORIES} verdicts ({args.updates} update, "
        f"{args.deletes} delete), add yes -> {args.updates + 1} writer calls; applied "
        f"updated={len(outcome.updated)} deleted={len(outcome.deleted)} "
        f"added={len(outcome.added)}"
    )
    print(
        f"fixed latencies: decision {DECISION_S * 1000:.0f} ms, chat {CHAT_S * 1000:.0f} ms; "
        f"critical path 50 + 50 + 50 + 300 = {CRITICAL_S * 1000:.0f} ms; the fakes alone "
        f"deliver that path to a bare client here in {floor * 1000:.1f} ms"
    )
    print(Summary([t.total for t in timings]).line("run_write_path"))
    print("where the time goes (mean of each segment, and what the fakes account for):")
    segments = [
        ("start -> worth_keeping (applied-trigger check)", "worth", "started", 0.0),
        ("worth_keeping -> verdicts (read + log under lock)", "verdicts", "worth", DECISION_S),
        ("verdicts -> add_memory (ten in parallel)", "add", "verdicts", DECISION_S),
        ("add_memory -> writer calls", "writes", "add", DECISION_S),
        ("writer calls (in parallel) -> last answer", "written", "writes", CHAT_S),
        ("last answer -> done (locked apply + ledger)", "finished", "written", 0.0),
    ]
    for name, end, start, allowed in segments:
        summary = Summary([getattr(t, end) - getattr(t, start) for t in timings])
        print(
            f"  {name:<50} mean {summary.mean:7.1f} ms  p95 {summary.p95:7.1f} ms"
            f"  (fakes {allowed * 1000:3.0f} ms, ours {summary.mean - allowed * 1000:6.1f} ms)"
        )
    summary = Summary([t.total for t in timings])
    print(f"mean/fake-floor ratio: {summary.mean / (floor * 1000):.3f}")
    print(f"p50/critical ratio: {summary.p50 / (CRITICAL_S * 1000):.3f}")
    print(f"p95/critical ratio: {summary.p95 / (CRITICAL_S * 1000):.3f}")
    print(f"write path mean/critical-path ratio: {summary.mean / (CRITICAL_S * 1000):.3f}")


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--updates", type=int, default=4)
    parser.add_argument("--deletes", type=int, default=1)
    args = parser.parse_args()
    if args.updates + args.deletes > MEMORIES:
        parser.error(f"at most {MEMORIES} updates and deletes together")

    database_url = await fresh_database(DB)
    speakers = [50_000 + i for i in range(args.warmup + args.runs)]
    await seed(speakers)

    jev = FakeJev(latency=DECISION_S)
    jev.answers[Question.WORTH_KEEPING] = 0.9
    jev.answers[Question.MEMORY_VERDICT] = verdict_for(args.updates, args.deletes)
    jev.answers[Question.ADD_MEMORY] = 0.9
    model = FakeAnthropic(responder=writer(itertools.count()))
    discord = FakeDiscord(bot_user_id=BOT_ID)
    jev_tap, model_tap = Tap(jev.app), Tap(model.app)
    async with (
        serve(jev_tap) as jev_url,
        serve(model_tap) as model_url,
        serve(discord.app) as discord_url,
    ):
        # The SDK reads its endpoint and key from the environment (app.chat.anthropic).
        os.environ["ANTHROPIC_BASE_URL"] = model_url
        os.environ["ANTHROPIC_API_KEY"] = "bench-anthropic-key"
        settings = Settings(
            database_url=database_url,
            gateway_token="bench-gateway-token-5e7a9c1b3d2f4068",
            discord_bot_token=discord.token,
            discord_api_base=discord_url,
            discord_bot_user_id=BOT_ID,
            jev_url=jev_url,
            jev_api_key="bench-jev-key",
            _env_file=None,
        )
        floor = await fake_floor(jev_url, model_url, MEMORIES, args.updates + 1)
        timings = []
        # The write path enqueues nothing; Services only needs a queue.
        async with open_services(settings, queue=InMemoryQueue()) as services:
            for index, speaker in enumerate(speakers):
                timing = await one_run(services, jev_tap, model_tap, speaker, index)
                if not timing.outcome.changed or timing.outcome.stopped is not None:
                    raise RuntimeError(f"run {index} did not write: {timing.outcome}")
                if index >= args.warmup:
                    timings.append(timing)
    report(timings, args, floor)


if __name__ == "__main__":
    asyncio.run(main())
