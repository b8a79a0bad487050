"""Many workers and API replicas on one Postgres and one Redis: throughput, latency, and
exactly once, also while a worker drains.

    python -m bench.scale [--conversations 200] [--turns 3] [--shapes 1x1,1x3,2x1,2x3,1x2,1x2d]
        [--drain-grace 0.1]

Each shape (API processes x worker processes; ``uvicorn app.main:app`` and the real worker)
runs against a fresh database and an empty Redis. 200 conversations, each in its own channel
with its own speaker, talk at once: every conversation posts a gateway MESSAGE_CREATE
mentioning the bot, waits for the bot's reply, then posts its next message; conversation i
posts to API i mod n (a load balancer's round robin). The decision service answers in 50 ms,
the model in 300 ms, Discord in 20 ms (local fakes in this process); worth_keeping says no, so
each turn's memory job asks exactly one question and stops. Prints, per shape, turns per
second and the webhook-to-reply latency (the reply's arrival at the fake Discord), then checks
that every acknowledged event has exactly one reply and one reaction and its memory job ran
exactly once, that the inbox has every event handled and Redis no job left. A failed check
is printed and the run exits 1. A shape ending in ``d`` (``1x2d``) sends SIGTERM to its first
worker once half of the measured turns are acknowledged, with WORKER_DRAIN_GRACE_S set to
``--drain-grace`` (short, so turns in flight are handed back rather than all finishing): it
prints when the worker exited (and with what code) and how many jobs it handed back, and its
checks are the same. Last, each shape's throughput against the first's, and a drained
shape's against the same shape undrained when both ran."""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
import re
import signal
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from subprocess import Popen
from typing import Any

import asyncpg
import httpx
from redis.asyncio import Redis

from app.chat.fake import Delay, FakeAnthropic, Text
from app.decision.fake import FakeJev
from app.decision.vocabulary import Question
from app.discord.fake import DISCORD_EPOCH_MS, FakeDiscord
from bench._rig import (
    UNLIMITED,
    Summary,
    asyncpg_dsn,
    bench_db,
    bench_redis_url,
    cpu_seconds,
    fresh_database,
    mention_frame,
    serve,
    start_process,
    wait_healthy,
)
from bench._taps import Delayed, Watch
from tests.support.servers import free_port

DB = bench_db("_scale")
REDIS_URL = bench_redis_url(13)
TOKEN = "bench-gateway-token-5e7a9c1b3d2f4068"
BOT_ID = 1000
GUILD_ID = 500
DECISION_S, CHAT_S, DISCORD_S = 0.050, 0.300, 0.020
MARKER = re.compile(rb"\[scale-(\d+)-\d+\]")  # [scale-<channel>-<turn>]
REPLY_PATH = re.compile(r"^/channels/(\d+)/messages$")


@dataclass(frozen=True)
class Shape:
    apis: int
    workers: int
    drain: bool = False  # SIGTERM to the first worker halfway through the measured turns

    @property
    def name(self) -> str:
        name = f"{self.apis} API x {self.workers} worker" + ("s" if self.workers > 1 else "")
        return name + (", one drained" if self.drain else "")


@dataclass
class Observed:
    """What the fakes saw, indexed as it arrives (the fakes keep the full record)."""

    replies: dict[int, asyncio.Future[float]] = field(default_factory=dict)  # trigger -> arrival
    worth_keeping: Counter[int] = field(default_factory=Counter)  # channel -> questions

    def jev(self, method: str, path: str, body: bytes, arrived: float) -> None:
        # A memory job's exchange holds lines of its own channel only.
        if b'"worth_keeping"' in body and (found := MARKER.search(body)):
            self.worth_keeping[int(found.group(1))] += 1

    def discord(self, method: str, path: str, body: bytes, arrived: float) -> None:
        if method != "POST" or not REPLY_PATH.match(path):
            return
        reference = (json.loads(body).get("message_reference") or {}).get("message_id")
        waiter = self.replies.get(int(reference)) if reference else None
        if waiter is not None and not waiter.done():
            waiter.set_result(arrived)


@dataclass(frozen=True)
class Turn:
    number: int  # its place in its conversation
    channel_id: int
    speaker_id: int
    message_id: int

    @property
    def marker(self) -> str:
        return f"[scale-{self.channel_id}-{self.number}]"

    def frame(self) -> bytes:
        return mention_frame(
            message_id=self.message_id,
            channel_id=self.channel_id,
            guild_id=GUILD_ID,
            speaker_id=self.speaker_id,
            username=f"u{self.speaker_id}",
            text=f"<@{BOT_ID}> {self.marker} what should I cook tonight?",
        )


@dataclass(frozen=True)
class Drained:
    """What became of the worker sent SIGTERM mid-run."""

    at_turn: int  # acknowledged turns when it was signalled
    exit_code: int | None
    exited_after_s: float
    completed: int  # jobs it finished, from its "worker drained" line
    released: int  # jobs it handed back


@dataclass
class Outcome:
    shape: Shape
    seconds: float
    latencies: list[float]
    acknowledged: list[Turn]
    problems: list[str]
    cpu: dict[str, float] = field(default_factory=dict)  # CPU seconds in the measured phase
    peak_connections: dict[str, int] = field(default_factory=dict)  # Postgres, Redis
    drained: Drained | None = None

    @property
    def turns_per_s(self) -> float:
        return len(self.latencies) / self.seconds


def conversations(count: int, turns: int, first_channel: int) -> list[list[Turn]]:
    """``count`` conversations of ``turns`` messages; ids never repeat across runs."""
    stamp = (int(time.time() * 1000) - DISCORD_EPOCH_MS) << 22
    ids = itertools.count(stamp + (1 << 21))
    return [
        [Turn(k, first_channel + c, 60_000 + c, next(ids)) for k in range(turns)]
        for c in range(count)
    ]


async def post(client: httpx.AsyncClient, turn: Turn) -> None:
    """Post like the relay: again after a dropped connection (uvicorn closes keep-alive
    connections idle for 5 s, and one may go just as it is reused). A retry may find the
    first attempt recorded: "duplicate" is then its acknowledgement."""
    for attempt in range(3):
        try:
            response = await client.post("/webhook", content=turn.frame())
        except httpx.TransportError:
            continue
        status = response.json().get("status") if response.status_code == 200 else None
        if status == "ok" or (attempt > 0 and status == "duplicate"):
            return
        raise RuntimeError(f"webhook answered {response.status_code}: {response.text}")
    raise RuntimeError(f"webhook unreachable for {turn.marker}")


async def converse(
    client: httpx.AsyncClient,
    observed: Observed,
    lane: list[Turn],
    latencies: list[float],
    acknowledged: list[Turn],
) -> None:
    for turn in lane:
        reply = observed.replies[turn.message_id] = asyncio.get_running_loop().create_future()
        posted = time.monotonic()
        await post(client, turn)
        acknowledged.append(turn)
        async with asyncio.timeout(180):
            latencies.append(await reply - posted)


async def drive(
    apis: list[str], observed: Observed, lanes: list[list[Turn]], acknowledged: list[Turn]
) -> tuple[list[float], float]:
    latencies: list[float] = []
    headers = {"x-discord-gateway-token": TOKEN}
    limits = httpx.Limits(max_connections=len(lanes))
    clients = [httpx.AsyncClient(base_url=url, headers=headers, limits=limits) for url in apis]
    started = time.monotonic()
    try:
        await asyncio.gather(
            *(
                converse(clients[i % len(clients)], observed, lane, latencies, acknowledged)
                for i, lane in enumerate(lanes)
            )
        )
    finally:
        for client in clients:
            await client.aclose()
    return latencies, time.monotonic() - started


async def settled(redis: Redis, observed: Observed, turns: list[Turn], within: float) -> bool:
    """Every memory job asked its question and Redis has no job due or running (cron runs
    aside: they are queued ahead of their time and keep their claim for a while)."""
    deadline = time.monotonic() + within
    per_channel = Counter(t.channel_id for t in turns)
    while time.monotonic() < deadline:
        asked = all(observed.worth_keeping[c] >= n for c, n in per_channel.items())
        idle = asked and await redis.zcount("arq:queue", "-inf", time.time() * 1000) == 0
        running = [k for k in await redis.keys("arq:in-progress:*") if b":cron:" not in k]
        if idle and not running:
            return True
        await asyncio.sleep(0.2)
    return False


def extractions_logged(logs: Path) -> Counter[int]:
    """How many times each trigger's memory job finished, from every worker's JSON log."""
    done: Counter[int] = Counter()
    for log in logs.glob("worker*.log"):
        for line in log.read_text(errors="replace").splitlines():
            if '"memory extraction done"' in line:
                done[int(json.loads(line)["trigger_id"])] += 1
    return done


async def check(
    outcome: Outcome, observed: Observed, discord: FakeDiscord, redis: Redis, logs: Path
) -> list[str]:
    """Exactly one reply, one reaction and one memory job per acknowledged event (its one
    worth_keeping question, and its one log line)."""
    turns = outcome.acknowledged
    problems = []
    if not await settled(redis, observed, turns, within=120):
        problems.append("work still due, running or never started after 120 s")
    replies = Counter(
        int(m["message_reference"]["message_id"])
        for m in discord.posted
        if m.get("message_reference")
    )
    reactions = Counter(r.message_id for r in discord.reactions)
    for label, counts in (("replies", replies), ("reactions", reactions)):
        wrong = [t for t in turns if counts[t.message_id] != 1]
        if wrong:
            seen = Counter(counts[t.message_id] for t in wrong)
            problems.append(f"{len(wrong)} events without exactly one of {label}: {dict(seen)}")
    per_channel = Counter(t.channel_id for t in turns)
    asked = {c: observed.worth_keeping[c] for c in per_channel}
    if asked != dict(per_channel):
        off = sum(1 for c, n in per_channel.items() if asked[c] != n)
        problems.append(f"{off} conversations whose memory jobs did not ask once per turn")
    extractions = extractions_logged(logs)
    wrong = [t for t in turns if extractions[t.message_id] != 1]
    if wrong:
        seen = Counter(extractions[t.message_id] for t in wrong)
        problems.append(f"{len(wrong)} events whose memory job did not log once: {dict(seen)}")
    conn = await asyncpg.connect(asyncpg_dsn(DB))
    try:
        open_events = await conn.fetchval("SELECT count(*) FROM inbox WHERE handled_at IS NULL")
    finally:
        await conn.close()
    if open_events:
        problems.append(f"{open_events} inbox events not handled")
    return problems


async def run_shape(
    shape: Shape, args: argparse.Namespace, first_channel: int, logs: Path
) -> Outcome:
    database_url = await fresh_database(DB)
    shape_logs = logs / f"{shape.apis}x{shape.workers}{'d' if shape.drain else ''}"
    shape_logs.mkdir()
    redis = Redis.from_url(REDIS_URL)
    await redis.flushdb()
    observed = Observed()
    jev = FakeJev(latency=DECISION_S)
    jev.answers[Question.WORTH_KEEPING] = 0.0  # the memory job stops after its first question
    model = FakeAnthropic(responder=lambda body: Delay(CHAT_S, Text("Pasta, obviously!")))
    discord = FakeDiscord(bot_user_id=BOT_ID)
    async with (
        serve(Watch(jev.app, observed.jev)) as jev_url,
        serve(model.app) as model_url,
        serve(Watch(Delayed(discord.app, DISCORD_S), observed.discord)) as discord_url,
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
            "ANTHROPIC_BASE_URL": model_url,
            "ANTHROPIC_API_KEY": "bench-anthropic-key",
            "MEMORY_CONSOLIDATE_EVERY": "1000000",  # no consolidation: one question per turn
        }
        processes: list[Popen[bytes]] = []
        try:
            apis = []
            for n in range(shape.apis):
                port = free_port()
                command = ["-m", "uvicorn", "app.main:app", "--port", str(port)]
                command += ["--no-access-log", "--log-level", "warning"]
                api = start_process(command, env, shape_logs / f"api{n}.log")
                processes.append(api)
                apis.append(f"http://127.0.0.1:{port}")
                await wait_healthy(apis[-1], api)
            if shape.drain:
                env["WORKER_DRAIN_GRACE_S"] = str(args.drain_grace)
            for n in range(shape.workers):
                worker_env = {**env, "WORKER_METRICS_PORT": str(free_port())}
                log = shape_logs / f"worker{n}.log"
                processes.append(start_process(["-m", "bench._worker"], worker_env, log))
            warmup = conversations(args.warmup, 1, first_channel)
            await drive(apis, observed, warmup, [])  # includes the workers' start-up
            lanes = conversations(args.conversations, args.turns, first_channel + args.warmup)
            roles = [("API", p) for p in processes[: shape.apis]]
            roles += [("workers", p) for p in processes[shape.apis :]]
            before = cpu_by_role(roles)
            peaks: dict[str, int] = {"Postgres": 0, "Redis": 0}
            sampling = asyncio.create_task(sample_connections(redis, peaks))
            acknowledged = Acks()
            half = args.conversations * args.turns // 2
            first_worker = processes[shape.apis]
            draining = (
                asyncio.create_task(
                    drain_midway(first_worker, acknowledged, half, shape_logs / "worker0.log")
                )
                if shape.drain
                else None
            )
            try:
                latencies, seconds = await drive(apis, observed, lanes, acknowledged)
            finally:
                sampling.cancel()
            used = cpu_by_role(roles)
            outcome = Outcome(shape, seconds, latencies, acknowledged, [])
            outcome.cpu = {role: used[role] - before[role] for role in used}
            outcome.peak_connections = peaks
            if draining is not None:
                outcome.drained = await draining
            outcome.problems = await check(outcome, observed, discord, redis, shape_logs)
            for process in processes:
                drained = draining is not None and process is first_worker
                if process.poll() is not None and not drained:
                    outcome.problems.append(f"a process exited early (code {process.returncode})")
            if outcome.drained is not None and outcome.drained.exit_code != 0:
                outcome.problems.append(f"the drained worker exited {outcome.drained.exit_code}")
            return outcome
        finally:
            for process in processes:
                process.terminate()
            for process in processes:
                process.wait(timeout=20)
            await redis.aclose()


EXITED_CPU: dict[int, float] = {}  # pid -> CPU seconds of a worker that exited (drained)


class Acks(list[Turn]):
    """The acknowledged turns; ``reached(n)`` returns once ``n`` are in."""

    def __init__(self) -> None:
        super().__init__()
        self._waiting: list[tuple[int, asyncio.Event]] = []

    def append(self, turn: Turn) -> None:
        super().append(turn)
        for count, event in self._waiting:
            if len(self) >= count:
                event.set()

    async def reached(self, count: int) -> None:
        event = asyncio.Event()
        self._waiting.append((count, event))
        if len(self) >= count:
            event.set()
        await event.wait()


async def drain_midway(worker: Popen[bytes], acknowledged: Acks, after: int, log: Path) -> Drained:
    """SIGTERM to ``worker`` once ``after`` turns are acknowledged; wait for it to exit."""
    await acknowledged.reached(after)
    at_turn = len(acknowledged)
    worker.send_signal(signal.SIGTERM)
    signalled = time.monotonic()
    # Reaped with its resource usage, so its CPU still counts once /proc forgets it.
    _, status, usage = await asyncio.to_thread(os.wait4, worker.pid, 0)
    exit_code = worker.returncode = os.waitstatus_to_exitcode(status)
    EXITED_CPU[worker.pid] = usage.ru_utime + usage.ru_stime
    exited_after_s = time.monotonic() - signalled
    last = last_drained(log)
    completed, released = int(last.get("completed", -1)), int(last.get("released", -1))
    return Drained(at_turn, exit_code, exited_after_s, completed, released)


def last_drained(log: Path) -> dict[str, Any]:
    """The worker's "worker drained" log line (empty when it never wrote one)."""
    lines = [line for line in log.read_text().splitlines() if '"worker drained"' in line]
    found: dict[str, Any] = json.loads(lines[-1]) if lines else {}
    return found


async def sample_connections(redis: Redis, peaks: dict[str, int]) -> None:
    """Keep the most connections seen to this run's database and Redis database (besides
    this sampler's own)."""
    conn = await asyncpg.connect(asyncpg_dsn(DB))
    try:
        while True:
            count = await conn.fetchval(
                "SELECT count(*) - 1 FROM pg_stat_activity WHERE datname = $1", DB
            )
            database = redis.connection_pool.connection_kwargs.get("db", 0)
            listed = await redis.client_list()
            clients = sum(1 for c in listed if int(c["db"]) == database) - 1
            peaks["Postgres"] = max(peaks["Postgres"], count)
            peaks["Redis"] = max(peaks["Redis"], clients)
            await asyncio.sleep(0.1)
    finally:
        await conn.close()


def cpu_by_role(roles: list[tuple[str, Popen[bytes]]]) -> dict[str, float]:
    """CPU seconds so far of the API and worker processes, and of this process (the fakes
    and the load)."""
    used = {"API": 0.0, "workers": 0.0, "fakes+load": time.process_time()}
    for role, process in roles:
        exited = EXITED_CPU.get(process.pid)
        used[role] += exited if exited is not None else cpu_seconds(process.pid)[0]
    return used


def report(outcome: Outcome) -> None:
    summary = Summary(outcome.latencies)
    print(
        f"{outcome.shape.name:<31} {outcome.turns_per_s:7.1f} turns/s   webhook -> reply "
        f"p50 {summary.q(0.5):8.1f} ms   p99 {summary.q(0.99):8.1f} ms   "
        f"({len(outcome.latencies)} turns in {outcome.seconds:.1f} s)"
    )
    cores = ", ".join(f"{role} {used / outcome.seconds:.2f}" for role, used in outcome.cpu.items())
    peaks = ", ".join(f"{name} {n}" for name, n in outcome.peak_connections.items())
    print(f"  CPU used, in cores: {cores}; most connections open: {peaks}")
    if outcome.drained is not None:
        d = outcome.drained
        print(
            f"  drained: SIGTERM at turn {d.at_turn}; the worker exited {d.exit_code} after "
            f"{d.exited_after_s:.1f} s, {d.completed} jobs completed, {d.released} handed back"
        )
    if outcome.problems:
        for problem in outcome.problems:
            print(f"  CHECK FAILED: {problem}")
    else:
        n = len(outcome.acknowledged)
        print(f"  checked: {n} acknowledged events, each 1 reply, 1 reaction, 1 memory job")


def parse_shapes(text: str) -> list[Shape]:
    shapes = []
    for part in text.split(","):
        apis, _, workers = part.partition("x")
        drain = workers.endswith("d")
        shapes.append(Shape(int(apis), int(workers.removesuffix("d")), drain))
        if drain and shapes[-1].workers < 2:
            raise argparse.ArgumentTypeError(f"{part}: draining needs a second worker")
    return shapes


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--conversations", type=int, default=200)
    parser.add_argument("--turns", type=int, default=3, help="messages per conversation")
    parser.add_argument("--warmup", type=int, default=20, help="one-turn warm-up conversations")
    parser.add_argument(
        "--shapes", type=parse_shapes, default=parse_shapes("1x1,1x3,2x1,2x3,1x2,1x2d")
    )
    parser.add_argument(
        "--drain-grace", type=float, default=0.1, help="WORKER_DRAIN_GRACE_S of a drained shape"
    )
    args = parser.parse_args()
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    print(
        f"conversations={args.conversations} turns each={args.turns} cores={os.cpu_count()} "
        f"load average {load}; fixed latencies: decision {DECISION_S * 1000:.0f} ms, model "
        f"{CHAT_S * 1000:.0f} ms, Discord {DISCORD_S * 1000:.0f} ms"
    )
    logs = Path(tempfile.mkdtemp(prefix="bench-scale-"))
    outcomes = []
    for i, shape in enumerate(args.shapes):
        try:
            outcome = await run_shape(shape, args, 800_000 + i * 10_000, logs)
        except Exception:
            print(f"{shape.name}: failed; process logs in {logs}", file=sys.stderr)
            raise
        outcomes.append(outcome)
        report(outcome)
    first = outcomes[0]
    for outcome in outcomes[1:]:
        ratio = outcome.turns_per_s / first.turns_per_s
        print(f"turns/s {outcome.shape.name} / {first.shape.name}: {ratio:.2f}")
    undrained = {o.shape: o for o in outcomes if not o.shape.drain}
    for outcome in (o for o in outcomes if o.shape.drain):
        same = undrained.get(Shape(outcome.shape.apis, outcome.shape.workers))
        if same is not None and same is not first:  # against the first: printed above
            ratio = outcome.turns_per_s / same.turns_per_s
            print(f"turns/s {outcome.shape.name} / {same.shape.name}: {ratio:.2f}")
    if any(outcome.problems for outcome in outcomes):
        print(f"exactly-once checks FAILED; process logs in {logs}")
        raise SystemExit(1)
    print("exactly-once checks passed for every shape")


if __name__ == "__main__":
    asyncio.run(main())
