"""Benchmark one turn end to end: POST /webhook until the fake Discord receives the reply.

    python -m bench.turn [--turns 30] [--warmup 3] [--concurrency 1] [--poll-delay S]
                         [--providers anthropic,openai]

The real API (uvicorn app.main:app) and the real worker (python -m app worker, long running, as
deployed) run as their own processes against a fresh database; the decision service answers in
50 ms, the model in 300 ms, Discord at once (local fakes in this process). A task agent is
configured (fake Jina), so the turn asks is_task as the seed allows, and the critical path is
the emoji questions in parallel + is_task + the reply = 400 ms. Each turn speaks in its own
channel with 20 earlier messages and a speaker with ten memories; the memory job after the
reply is awaited before the next turn, outside the measured time. Prints the latency, where it
goes, the ratio of the mean to the critical path, how long the fakes really held the critical
path's calls (arrival to answer: their own serving and timers come on top of the fixed 400 ms,
and are not ours) with what remains of the turn, the same calls made bare from this process
after every turn (a baseline measured in the same run, on the machine as the turn left it: the
fixed 400 ms and what any caller pays the fakes and loopback HTTP), about the floor any design
of the turn pays (those calls and the hops at its two ends: what the 1.05 target leaves for the
rest), and the CPU each process ran per turn (the worker's, with its memory job: what its share
of the turn is made of) with the statements and transactions the worker sent to Postgres per
turn (counted, so the machine's load does not blur them as it blurs the times). With both
providers (the default), the same turns run once on each chat adapter (CHAT_PROVIDER, the fake
Anthropic Messages API or the fake OpenAI-compatible server, same latency), each on a fresh
database, and the run ends with the OpenAI adapter's ratios to Anthropic's. A provider named
twice runs twice and its turns are pooled: ``anthropic,openai,openai,anthropic`` cancels a load
that drifts during the run."""

from __future__ import annotations

import argparse
import asyncio
import itertools
import os
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import asyncpg
import httpx
from prometheus_client.parser import text_string_to_metric_families
from redis.asyncio import Redis

from app.agent.fake_jina import FakeJina
from app.chat.fake import Delay, FakeAnthropic, Text
from app.chat.fake_openai import FakeOpenAI
from app.config import Provider
from app.decision.fake import FakeJev
from app.decision.vocabulary import Question
from app.decision.wire import request_body
from app.discord.fake import DISCORD_EPOCH_MS, FakeDiscord
from app.worker import POLL_DELAY_S
from bench._rig import (
    UNLIMITED,
    Summary,
    asyncpg_dsn,
    bench_db,
    bench_redis_url,
    cpu_seconds,
    fresh_database,
    mention_frame,
    seed_memories,
    serve,
    start_process,
    wait_healthy,
)
from bench._taps import Hit, Tap
from tests.support.servers import free_port

DB = bench_db("_turn")
REDIS_URL = os.environ.get("BENCH_TURN_REDIS_URL") or bench_redis_url(11)
TOKEN = "bench-gateway-token-5e7a9c1b3d2f4068"
BOT_ID = 1000
GUILD_ID = 500
DECISION_S = 0.050
CHAT_S = 0.300
HISTORY = 20  # earlier messages in each channel: the context read returns a full window
MEMORIES = 10  # memories of each speaker: recall reads a full ten


@dataclass
class Turn:
    index: int
    channel_id: int
    speaker_id: int
    message_id: int

    @property
    def marker(self) -> str:
        return f"[bench-turn-{self.index:05d}]"

    def frame(self) -> bytes:
        return mention_frame(
            message_id=self.message_id,
            channel_id=self.channel_id,
            guild_id=GUILD_ID,
            speaker_id=self.speaker_id,
            username=f"user{self.index}",
            text=f"<@{BOT_ID}> {self.marker} what should I cook tonight?",
        )


@dataclass
class Timing:
    """Arrival times (time.monotonic) at each point of one turn, as the fakes saw them."""

    posted: float
    acked: float
    emoji: float  # the first emoji question reached the decision service
    is_task: float | None
    chat: float  # the reply request reached the model
    reply: float  # the reply POST reached Discord
    asked: tuple[str, ...]  # the questions asked before the reply
    # How long the fakes held the critical path's calls, arrival to answer (the slower of the
    # emoji pair, is_task, the model): their fixed latency plus their own serving and timers.
    held: float

    @property
    def total(self) -> float:
        return self.reply - self.posted

    @property
    def critical(self) -> float:
        emoji = DECISION_S if {"emoji_enough", "emoji_choice"} & set(self.asked) else 0.0
        task = DECISION_S if "is_task" in self.asked else 0.0
        return emoji + task + CHAT_S


@dataclass
class Fakes:
    jev: Tap
    model: Tap
    discord: Tap


def make_turns(count: int) -> list[Turn]:
    stamp = (int(time.time() * 1000) - DISCORD_EPOCH_MS) << 22
    # Ids the fake Discord never issues (it counts up from the stamp) and never repeat.
    ids = itertools.count(stamp + (1 << 21))
    return [Turn(i, 700_000 + i, 30_000 + i, next(ids)) for i in range(count)]


async def seed(turns: list[Turn]) -> None:
    """Each turn's channel gets earlier talk (speaker, a friend, the bot); its speaker has
    ten memories, so the context read and recall return full windows."""
    conn = await asyncpg.connect(asyncpg_dsn(DB))
    try:
        channels = [t.channel_id for t in turns]
        speakers = [t.speaker_id for t in turns]
        await conn.execute(
            """
            INSERT INTO messages (id, channel_id, guild_id, author_id, author_name, is_bot,
                                  content, created_at)
            SELECT c.channel * 100 + k, c.channel, $3,
                   CASE k % 3 WHEN 0 THEN $4 WHEN 1 THEN c.speaker ELSE 40000 END,
                   CASE k % 3 WHEN 0 THEN 'companion' WHEN 1 THEN 'speaker' ELSE 'friend' END,
                   k % 3 = 0, 'earlier message number ' || k || ' about dinner plans',
                   now() - make_interval(mins => 60 - k)
            FROM unnest($1::bigint[], $2::bigint[]) AS c(channel, speaker),
                 generate_series(1, $5::int) AS k
            """,
            channels,
            speakers,
            GUILD_ID,
            BOT_ID,
            HISTORY,
        )
        await seed_memories(conn, speakers, MEMORIES)
    finally:
        await conn.close()


def effective_poll_delay(override: float | None) -> float:
    return override if override is not None else POLL_DELAY_S


async def run_turn(client: httpx.AsyncClient, fakes: Fakes, turn: Turn) -> Timing:
    marker = turn.marker
    reply_path = f"/channels/{turn.channel_id}/messages"
    posted = time.monotonic()
    response = await client.post("/webhook", content=turn.frame())
    acked = time.monotonic()
    if response.status_code != 200 or response.json().get("status") != "ok":
        raise RuntimeError(f"webhook answered {response.status_code}: {response.text}")
    reply = await fakes.discord.wait_for(lambda h: h.method == "POST" and h.path == reply_path)
    # The memory job follows the reply: wait for its first question so it has left the
    # worker's path before the next turn starts (this wait is not measured).
    await fakes.jev.wait_for(lambda h: h.mentions(marker) and _question(h) == "worth_keeping")
    mine = [h for h in fakes.jev.hits if h.mentions(marker) and h.arrived < reply.arrived]
    asked = tuple(sorted({_question(h) for h in mine}))
    pair = [h for h in mine if _question(h) in ("emoji_enough", "emoji_choice")]
    task = [h for h in mine if _question(h) == "is_task"]
    chat = next(h for h in fakes.model.hits if h.mentions(marker))
    return Timing(
        posted=posted,
        acked=acked,
        emoji=min(h.arrived for h in pair),
        is_task=task[0].arrived if task else None,
        chat=chat.arrived,
        reply=reply.arrived,
        asked=asked,
        held=sum(_held(h) for h in [max(pair, key=_held), *task, chat]),
    )


def _held(hit: Hit) -> float:
    assert hit.finished is not None  # waited for until answered
    return hit.finished - hit.arrived


def _question(hit: Hit) -> str:
    body = hit.json()
    return str(body.get("question")) if isinstance(body, dict) else ""


async def run_lane(
    client: httpx.AsyncClient,
    fakes: Fakes,
    turns: list[Turn],
    out: list[Timing],
    pause: float,
    bare: BarePath | None = None,
) -> None:
    jitter = random.Random(turns[0].index if turns else 0)
    for turn in turns:
        # People do not write in step with the worker's polling: a random pause (not
        # measured) spreads arrivals over the poll cycle as real traffic would.
        await asyncio.sleep(jitter.uniform(0, pause))
        async with asyncio.timeout(60):
            out.append(await run_turn(client, fakes, turn))
            if bare is not None:  # the baseline, on the machine as the turn just left it
                await bare.measure()


async def run_all(
    api: str,
    fakes: Fakes,
    turns: list[Turn],
    concurrency: int,
    pause: float,
    bare: BarePath | None = None,
) -> tuple[list[Timing], float]:
    out: list[Timing] = []
    lanes = [turns[i::concurrency] for i in range(concurrency)]
    started = time.monotonic()
    async with httpx.AsyncClient(base_url=api, headers={"x-discord-gateway-token": TOKEN}) as c:
        await asyncio.gather(*(run_lane(c, fakes, lane, out, pause, bare) for lane in lanes))
    return out, time.monotonic() - started


class BarePath:
    """The baseline measured in the same run: the critical path's calls made bare, from here,
    once after every turn (the emoji pair in parallel, is_task, the model), with nothing of
    ours between them: the fixed 400 ms plus what any caller pays the fakes and the loopback
    HTTP on this machine at that moment. Its client shares this process's loop with the
    fakes, as the worker's does not, so it is a baseline to compare with, not a bound.

    Beside it, the hops at the turn's two ends that any design of it makes, also bare (the
    ``edges``): one loopback HTTP round trip (the webhook's request in and the reply's POST
    out are a half each), one durable commit (the event's record before it is handed on)
    and one Redis round trip (the hand-off to a worker). The bare path and its edges are about
    the floor of the turn on this machine before any work of ours: a little above it, as the
    client's own work here waits on the fakes' serving, where the worker's runs beside it."""

    def __init__(self, jev_url: str, model_url: str, provider: Provider, dsn: str) -> None:
        self._decide = jev_url + "/v1/decide"
        self._hop = jev_url + "/healthz"
        path = "/v1/chat/completions" if provider is Provider.OPENAI else "/v1/messages"
        self._chat = model_url + path
        self._client = httpx.AsyncClient()
        self._dsn = dsn
        self._database: asyncpg.Connection | None = None
        self._redis = Redis.from_url(REDIS_URL)
        self.samples: list[float] = []
        self.edges: list[tuple[float, float, float]] = []  # HTTP, commit, Redis

    async def open(self) -> None:
        self._database = await asyncpg.connect(self._dsn)
        await self._database.execute(
            "CREATE TABLE IF NOT EXISTS bench_floor (id bigserial PRIMARY KEY, at float8)"
        )

    async def measure(self) -> None:
        started = time.monotonic()
        await asyncio.gather(self.ask(Question.EMOJI_ENOUGH), self.ask(Question.EMOJI_CHOICE))
        await self.ask(Question.IS_TASK)
        await self.chat()
        self.samples.append(time.monotonic() - started)
        self.edges.append(await self.edge_hops())

    async def edge_hops(self) -> tuple[float, float, float]:
        assert self._database is not None, "open() first"
        started = time.monotonic()
        (await self._client.get(self._hop)).raise_for_status()
        answered = time.monotonic()
        await self._database.execute("INSERT INTO bench_floor (at) VALUES ($1)", started)
        committed = time.monotonic()
        await self._redis.ping()
        return answered - started, committed - answered, time.monotonic() - committed

    async def chat(self) -> None:
        message = {
            "model": "fake",
            "max_tokens": 16,
            "messages": [{"role": "user", "content": "floor"}],
        }
        (await self._client.post(self._chat, json=message)).raise_for_status()

    async def ask(self, question: Question) -> None:
        options = ["👍", "🍝"] if question is Question.EMOJI_CHOICE else None
        body = request_body(question, "floor", options)
        (await self._client.post(self._decide, json=body)).raise_for_status()

    async def aclose(self) -> None:
        await self._client.aclose()
        await self._redis.aclose()
        if self._database is not None:
            try:
                await self._database.execute("DROP TABLE IF EXISTS bench_floor")
            finally:
                await self._database.close()


async def fake_floor(bare: BarePath, rounds: int = 10) -> tuple[float, float]:
    """Median round trip of one bare call to each fake from here: its fixed latency plus
    HTTP and framework overhead, which the turn pays too and which is not ours."""
    decisions, chats = [], []
    for _ in range(rounds):
        decisions.append(await _timed(bare.ask(Question.IS_TASK)))
        chats.append(await _timed(bare.chat()))
    return statistics.median(decisions), statistics.median(chats)


async def _timed(call: Awaitable[None]) -> float:
    started = time.monotonic()
    await call
    return time.monotonic() - started


def report(
    timings: list[Timing],
    seconds: float,
    args: argparse.Namespace,
    floor: tuple[float, float],
    bare: BarePath,
) -> None:
    poll = effective_poll_delay(args.poll_delay)
    source = "override" if args.poll_delay is not None else "as deployed"
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    print(
        f"turns={len(timings)} warmup={args.warmup} concurrency={args.concurrency} "
        f"cores={os.cpu_count()} load average {load} "
        f"worker poll_delay={poll * 1000:.0f} ms ({source}; a fallback: each enqueue wakes the "
        f"worker) wall={seconds:.1f} s"
    )
    print(
        f"fixed latencies: decision {DECISION_S * 1000:.0f} ms, chat {CHAT_S * 1000:.0f} ms, "
        f"Discord immediate; one bare call to the fake takes {floor[0] * 1000:.1f} ms "
        f"(decision) and {floor[1] * 1000:.1f} ms (chat) from here"
    )
    asked = sorted({q for t in timings for q in t.asked})
    critical = max(t.critical for t in timings)
    print(
        f"asked before the reply: {', '.join(asked)} -> critical path "
        f"{'50 (emoji pair, parallel) + ' if 'emoji_choice' in asked else ''}"
        f"{'50 (is_task) + ' if 'is_task' in asked else ''}300 (reply) = "
        f"{critical * 1000:.0f} ms"
    )
    print(Summary([t.total for t in timings]).line("webhook -> reply"))
    print("where the time goes (mean of each segment, and what the fakes account for):")
    segments: list[tuple[str, list[float], float]] = [
        ("POST -> 200 (inbox commit)", [t.acked - t.posted for t in timings], 0.0),
        (
            "200 -> first question (queue, claim, log, context)",
            [t.emoji - t.acked for t in timings],
            0.0,
        ),
        (
            "emoji questions -> next call (react step)",
            [(t.is_task or t.chat) - t.emoji for t in timings],
            DECISION_S,
        ),
    ]
    if all(t.is_task is not None for t in timings):
        segments.append(
            (
                "is_task -> model request (recall, prompt)",
                [t.chat - (t.is_task or t.chat) for t in timings],
                DECISION_S,
            )
        )
    segments.append(("model request -> reply POST", [t.reply - t.chat for t in timings], CHAT_S))
    for name, values, allowed in segments:
        summary = Summary(values)
        print(
            f"  {name:<52} mean {summary.mean:7.1f} ms  p95 {summary.p95:7.1f} ms"
            f"  (fakes {allowed * 1000:3.0f} ms, ours {summary.mean - allowed * 1000:6.1f} ms)"
        )
    summary = Summary([t.total for t in timings])
    print(f"p50/critical ratio: {summary.p50 / (critical * 1000):.3f}")
    print(f"p95/critical ratio: {summary.p95 / (critical * 1000):.3f}")
    print(f"turn mean/critical-path ratio: {summary.mean / (critical * 1000):.3f}")
    if bare.samples:
        bare_path = Summary(bare.samples)
        print(
            f"the same calls made bare from here after each turn (the same-run baseline; not "
            f"the target's ratio): mean {bare_path.mean:.1f} ms, p95 {bare_path.p95:.1f} ms; "
            f"turn mean/bare mean {summary.mean / bare_path.mean:.3f}, "
            f"p95/bare p95 {summary.p95 / bare_path.p95:.3f}"
        )
        # What the target leaves once the turn's bare calls and the hops at its two ends, which
        # no design avoids, are paid: the budget for everything of ours in between.
        http, commit, redis = (Summary(hops).mean for hops in zip(*bare.edges, strict=True))
        least = bare_path.mean + http + commit + redis
        print(
            f"about the floor before any work of ours (the bare calls, and at the two ends one "
            f"HTTP round trip {http:.1f} ms, one durable commit {commit:.1f} ms and one Redis "
            f"round trip {redis:.1f} ms): {least:.1f} ms, "
            f"{least / (critical * 1000):.3f} of the critical path; at 1.05 it "
            f"leaves {1.05 * critical * 1000 - least:.1f} ms for the rest of the turn, which "
            f"takes {summary.mean - least:.1f} ms now"
        )
    # Not the target's ratio (that is the one above): how much of "ours" the fakes' own serving
    # makes, so that work on the turn is measured against what it can change.
    held = Summary([t.held for t in timings])
    ours = Summary([t.total - t.held for t in timings])
    print(
        f"the fakes held the critical path's calls {held.mean:.1f} ms on average (their fixed "
        f"{critical * 1000:.0f} ms and {held.mean - critical * 1000:.1f} ms of their own serving); "
        f"the rest, ours: mean {ours.mean:.1f} ms, p95 {ours.p95:.1f} ms"
    )


def chat_model(provider: Provider) -> FakeAnthropic | FakeOpenAI:
    """The fake the worker's chat adapter speaks to, with the same fixed latency."""
    if provider is Provider.OPENAI:
        return FakeOpenAI(responder=answer_slowly)
    return FakeAnthropic(responder=answer_slowly)


def answer_slowly(body: dict[str, Any]) -> Delay:
    return Delay(CHAT_S, Text("Pasta, obviously!"))


def provider_env(provider: Provider, model_url: str) -> dict[str, str]:
    if provider is Provider.OPENAI:
        return {
            "CHAT_PROVIDER": "openai",
            "CHAT_MODEL": "bench-local-model",
            "OPENAI_BASE_URL": model_url + "/v1",
            "OPENAI_API_KEY": "bench-openai-key",
        }
    return {"ANTHROPIC_BASE_URL": model_url, "ANTHROPIC_API_KEY": "bench-anthropic-key"}


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--turns", type=int, default=30)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--concurrency", type=int, default=1, help="channels in flight")
    parser.add_argument(
        "--poll-delay", type=float, default=None, help="override ARQ's poll delay (diagnosis)"
    )
    parser.add_argument(
        "--providers",
        default="anthropic,openai",
        help="chat adapters to run, in order, comma-separated (anthropic, openai)",
    )
    args = parser.parse_args()
    runs: dict[Provider, list[Timing]] = {}
    for provider in (Provider(p.strip()) for p in args.providers.split(",") if p.strip()):
        print(f"== CHAT_PROVIDER={provider.value}")
        timings, seconds, floor, bare, spent = await run_provider(provider, args)
        report(timings, seconds, args, floor, bare)
        print(spent.line(len(timings)))
        runs.setdefault(provider, []).extend(timings)
    if Provider.ANTHROPIC in runs and Provider.OPENAI in runs:
        compare(runs[Provider.ANTHROPIC], runs[Provider.OPENAI])


def compare(anthropic: list[Timing], openai: list[Timing]) -> None:
    """The OpenAI adapter's figures over Anthropic's: the whole turn, and the segment the
    adapter is on (model request -> reply POST, less the fake's fixed latency)."""
    print("== the OpenAI adapter against the Anthropic adapter, same run, same fakes' latency")
    a, o = Summary([t.total for t in anthropic]), Summary([t.total for t in openai])
    print(f"openai/anthropic mean ratio: {o.mean / a.mean:.3f}")
    print(f"openai/anthropic p50 ratio: {o.p50 / a.p50:.3f}")
    print(f"openai/anthropic p95 ratio: {o.p95 / a.p95:.3f}")
    a_call = Summary([t.reply - t.chat for t in anthropic])
    o_call = Summary([t.reply - t.chat for t in openai])
    ours_a, ours_o = a_call.mean - CHAT_S * 1000, o_call.mean - CHAT_S * 1000
    print(
        f"model request -> reply POST, ours: anthropic {ours_a:.1f} ms, openai {ours_o:.1f} ms "
        f"(ratio {ours_o / ours_a:.3f}); whole segment ratio {o_call.mean / a_call.mean:.3f}"
    )


@dataclass(frozen=True)
class Spent:
    """CPU seconds each process ran over the measured turns (every thread's schedstat), and
    the statements and transactions the worker sent to Postgres meanwhile."""

    worker: float
    api: float
    statements: float
    transactions: float

    def line(self, turns: int) -> str:
        return (
            f"CPU per turn (each with its memory job): worker {self.worker * 1000 / turns:.1f} "
            f"ms, API {self.api * 1000 / turns:.1f} ms; the worker's part of a turn runs on one "
            "event loop, so its CPU is most of 'ours' above\n"
            f"Postgres per turn (the worker's, with its memory job): "
            f"{self.statements / turns:.1f} statements in {self.transactions / turns:.1f} "
            "transactions (each also a BEGIN and its COMMIT or ROLLBACK: round trips too)"
        )


async def database_work(metrics_port: int) -> tuple[float, float]:
    """The worker's statements and transactions so far (bench._worker counts them)."""
    async with httpx.AsyncClient() as client:
        response = await client.get(f"http://127.0.0.1:{metrics_port}/metrics")
    samples = {
        sample.name: sample.value
        for family in text_string_to_metric_families(response.raise_for_status().text)
        for sample in family.samples
    }
    return (
        samples["bench_worker_db_statements_total"],
        samples["bench_worker_db_transactions_total"],
    )


async def run_provider(
    provider: Provider, args: argparse.Namespace
) -> tuple[list[Timing], float, tuple[float, float], BarePath, Spent]:
    database_url = await fresh_database(DB)
    redis = Redis.from_url(REDIS_URL)
    await redis.flushdb()
    await redis.aclose()
    turns = make_turns(args.warmup + args.turns)
    warmup, measured = turns[: args.warmup], turns[args.warmup :]
    await seed(turns)

    jev = FakeJev(latency=DECISION_S)
    jev.answers[Question.WORTH_KEEPING] = 0.0  # the memory job stops after its first question
    model = chat_model(provider)
    discord = FakeDiscord(bot_user_id=BOT_ID)
    jina = FakeJina()
    fakes = Fakes(Tap(jev.app), Tap(model.app), Tap(discord.app))
    logs = Path(tempfile.mkdtemp(prefix="bench-turn-"))
    metrics_port = free_port()
    async with (
        serve(fakes.jev) as jev_url,
        serve(fakes.model) as model_url,
        serve(fakes.discord) as discord_url,
        serve(jina.app) as jina_url,
    ):
        env = {
            **os.environ,
            **UNLIMITED,
            "DATABASE_URL": database_url,
            "REDIS_URL": REDIS_URL,
            "GATEWAY_TOKEN": TOKEN,
            "DISCORD_BOT_TOKEN": discord.token,
            "DISCORD_API_BASE": discord_url,
            "DISCORD_BOT_USER_ID": str(BOT_ID),
            "JEV_URL": jev_url,
            "JEV_API_KEY": "bench-jev-key",
            **provider_env(provider, model_url),
            "JINA_API_KEY": jina.api_key,
            "JINA_SEARCH_URL": jina_url + "/search",
            "JINA_READER_URL": jina_url + "/reader",
            "WORKER_METRICS_PORT": str(metrics_port),
        }
        bare = BarePath(jev_url, model_url, provider, asyncpg_dsn(DB))
        port = free_port()
        worker_args = ["-m", "bench._worker"]
        if args.poll_delay is not None:
            worker_args.append(str(args.poll_delay))
        api_cmd = ["-m", "uvicorn", "app.main:app", "--port", str(port), "--no-access-log"]
        api = start_process([*api_cmd, "--log-level", "warning"], env, logs / "api.log")
        worker = start_process(worker_args, env, logs / "worker.log")
        try:
            url = f"http://127.0.0.1:{port}"
            await bare.open()
            await wait_healthy(url, api)
            floor = await fake_floor(bare)
            await run_all(url, fakes, warmup, 1, 0.0)  # includes the worker's start-up
            pause = effective_poll_delay(args.poll_delay)
            before = [cpu_seconds(p.pid)[0] for p in (worker, api)]
            database_before = await database_work(metrics_port)
            timings, seconds = await run_all(url, fakes, measured, args.concurrency, pause, bare)
            after = [cpu_seconds(p.pid)[0] for p in (worker, api)]
            database_after = await database_work(metrics_port)
        except Exception:
            print(f"failed; process logs in {logs}", file=sys.stderr)
            raise
        finally:
            await bare.aclose()
            for process in (worker, api):
                process.terminate()
            for process in (worker, api):
                process.wait(timeout=15)
    timings.sort(key=lambda t: t.posted)
    spent = Spent(
        worker=after[0] - before[0],
        api=after[1] - before[1],
        statements=database_after[0] - database_before[0],
        transactions=database_after[1] - database_before[1],
    )
    return timings, seconds, floor, bare, spent


if __name__ == "__main__":
    asyncio.run(main())
