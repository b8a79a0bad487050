"""Fault-suite tools: the real worker as a killable process, posting like the relay, waiting
on conditions, and counting what happened to every event (sent, acknowledged, processed,
duplicated, lost)."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import AsyncIterator, Iterable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
from redis.asyncio import Redis
from sqlalchemy import text

from app.config import Settings
from app.db import SessionFactory
from app.discord.fake import FakeDiscord
from app.inbound.store import sweep_inbox
from app.kit.arqueue import ArqQueue
from tests.support.frames import message_create
from tests.support.servers import free_port
from tests.support.stack import BOT_ID, Stack, running_stack
from tests.support.waiting import wait_until

ROOT = Path(__file__).resolve().parents[2]
TOKEN = {"x-discord-gateway-token": "test-gateway-token-3d9f1c7a5b2e8064"}
MAX_STARTS = 5  # a worker that keeps dying is a failure, not something to restart forever
REPORTS: list[str] = []  # every tally line, repeated in pytest's terminal summary


# -- the worker process ---------------------------------------------------------------------


def worker_env(settings: Settings, anthropic_url: str) -> dict[str, str]:
    """The environment `python -m app worker` reads: private services and fakes."""
    # A clean environment: nothing from the caller's shell (keys, sandbox, memory switches).
    env = {k: v for k, v in os.environ.items() if k in ("PATH", "HOME", "LANG", "TMPDIR", "TZ")}
    token = settings.discord_bot_token
    env.update(
        DATABASE_URL=settings.database_url,
        REDIS_URL=settings.redis_url,
        GATEWAY_TOKEN=settings.gateway_token.get_secret_value(),
        DISCORD_API_BASE=settings.discord_api_base,
        DISCORD_BOT_TOKEN=token.get_secret_value() if token else "",
        DISCORD_BOT_USER_ID=str(settings.discord_bot_user_id),
        JEV_URL=settings.jev_url or "",
        JEV_API_KEY=settings.jev_api_key.get_secret_value() if settings.jev_api_key else "",
        ANTHROPIC_BASE_URL=anthropic_url,
        ANTHROPIC_API_KEY="test-anthropic-key",
        CHAT_TIMEOUT_S=str(settings.chat_timeout_s),
        SANDBOX_BACKEND="none",
        WORKER_METRICS_PORT=str(free_port()),
        TURNS_PER_USER_PER_MINUTE=str(settings.turns_per_user_per_minute),
        COMMANDS_PER_USER_PER_MINUTE=str(settings.commands_per_user_per_minute),
    )
    return env


@dataclass
class WorkerProcess:
    """One `python -m app worker` process; its output goes to ``log``."""

    env: dict[str, str]
    log: Path
    process: subprocess.Popen[bytes] | None = None
    started: int = 0

    def start(self) -> None:
        if self.started >= MAX_STARTS:
            raise AssertionError(f"worker started {self.started} times:\n{self.tail()}")
        with self.log.open("ab") as out:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "app", "worker"],
                cwd=ROOT,
                env=self.env,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        self.started += 1

    def revive(self) -> None:
        """What the supervisor (compose ``restart: unless-stopped``) does for a dead worker."""
        if not self.alive:
            self.start()

    def memory_jobs_done(self) -> int:
        """Distinct replies whose memory job finished, from the worker's JSON log lines."""
        done = set()
        for line in self.log.read_text(errors="replace").splitlines():
            if '"memory extraction done"' in line:
                try:
                    done.add(json.loads(line).get("trigger_id"))
                except ValueError:
                    continue
        return len(done)

    def logged(self, phrase: str) -> bool:
        """Whether any of the worker's log lines contains ``phrase``."""
        return phrase in self.log.read_text(errors="replace")

    @property
    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def kill(self) -> None:
        """SIGKILL: no shutdown hook, no finished job, its in-progress keys stay behind."""
        if self.process is not None and self.alive:
            os.kill(self.process.pid, signal.SIGKILL)
            self.process.wait(timeout=10)

    def stop(self) -> None:
        if self.process is None or not self.alive:
            return
        self.process.terminate()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.kill()

    async def polling(self, queue: ArqQueue) -> None:
        """Wait until the worker has started polling (ARQ writes its health-check key then)."""
        await wait_until(
            lambda: queue.redis.exists("arq:queue:health-check"),
            within=60,
            what="the worker to start polling",
        )

    async def ready(self) -> None:
        """Wait until this process polls (the health-check key is shared by every worker)."""
        await wait_until(
            lambda: self.logged('"worker polling"'), within=60, what="the worker to poll"
        )

    def tail(self, lines: int = 40) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""


def worker_pair(settings: Settings, log: Path) -> tuple[WorkerProcess, WorkerProcess]:
    """Two worker processes on the same services, each with its own metrics port and log."""
    env = worker_env(settings, os.environ["ANTHROPIC_BASE_URL"])
    first = WorkerProcess(env, log)
    second_env = {**env, "WORKER_METRICS_PORT": str(free_port())}  # both may run at once
    return first, WorkerProcess(second_env, log.with_name("second-worker.log"))


@asynccontextmanager
async def pair_running(
    first: WorkerProcess,
    second: WorkerProcess,
    redis: Redis,
    *,
    release: asyncio.Event | None = None,
) -> AsyncIterator[None]:
    """The body's workers, ended whatever happens: both logs' tails printed when it fails;
    then what the fakes hold is released, the first killed, the second stopped, Redis closed."""
    try:
        yield
    except BaseException:
        print(first.tail(), second.tail(), sep="\n")
        raise
    finally:
        if release is not None:
            release.set()
        first.kill()
        second.stop()
        await redis.aclose()


# -- holding a fake's answers ---------------------------------------------------------------


class ResponseGate:
    """ASGI wrapper: while closed, matching requests are handled (the fake records them) but
    their responses wait for ``open`` — a call that took effect whose answer is still in flight."""

    def __init__(self, app: Any, method: str, path_suffix: str) -> None:
        self.app, self.method, self.path_suffix = app, method, path_suffix
        self.closed = False
        self.held = 0
        self._opened = asyncio.Event()

    def open(self) -> None:
        self._opened.set()

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        matches = (
            scope["type"] == "http"
            and scope["method"] == self.method
            and scope["path"].endswith(self.path_suffix)
        )
        if not (self.closed and matches):
            await self.app(scope, receive, send)
            return
        self.held += 1

        async def held_send(message: Any) -> None:
            if message["type"] == "http.response.start":
                await self._opened.wait()
            await send(message)

        await self.app(scope, receive, held_send)


@asynccontextmanager
async def gated_stack(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[tuple[Stack, ResponseGate]]:
    """``running_stack`` with a gate on the fake Discord's message posts."""
    discord = FakeDiscord(bot_user_id=BOT_ID)
    gate = ResponseGate(discord.app, "POST", "/messages")
    async with running_stack(settings, monkeypatch, discord=discord, discord_app=gate) as stack:
        try:
            yield stack, gate
        finally:
            gate.open()  # a held answer must not stall the fake's shutdown


# -- posting like the relay -----------------------------------------------------------------


async def post(client: httpx.AsyncClient, frame: dict[str, Any]) -> tuple[int, str]:
    """POST one frame to /webhook: (status, body status or error). A transport error is 0."""
    try:
        response = await client.post("/webhook", content=json.dumps(frame), headers=TOKEN)
    except httpx.HTTPError as exc:
        return 0, type(exc).__name__
    try:
        return response.status_code, str(response.json().get("status", ""))
    except ValueError:
        return response.status_code, ""


async def post_until_acknowledged(
    client: httpx.AsyncClient, frame: dict[str, Any], *, within: float = 30.0
) -> int:
    """The relay's retry: post again until a 200; returns how many attempts it took."""
    attempts = 0
    deadline = time.monotonic() + within
    while True:
        attempts += 1
        status, _ = await post(client, frame)
        if status == 200:
            return attempts
        if time.monotonic() > deadline:
            raise AssertionError(f"frame {frame['d']['id']} never acknowledged (last {status})")
        await asyncio.sleep(0.05)  # the relay's back-off between retries, not a synchronisation


async def post_mentions(stack: Stack, tally: Tally, *, turns: int, first_channel: int) -> set[int]:
    """Post ``turns`` mentions of the bot, each in its own channel; their message ids."""
    frames = [
        message_create(content=f"<@{BOT_ID}> hello number {n}", channel_id=first_channel + n)
        for n in range(turns)
    ]
    async with httpx.AsyncClient(base_url=stack.api, timeout=10) as client:
        for frame in frames:
            status, _ = await post(client, frame)
            tally.sent += 1
            tally.acknowledged += status == 200
    return {int(f["d"]["id"]) for f in frames}


# -- counting -------------------------------------------------------------------------------


@dataclass
class Tally:
    """What a fault test injected and what became of the events it sent."""

    name: str
    injected: list[str] = field(default_factory=list)
    sent: int = 0
    acknowledged: int = 0
    refused: int = 0  # answered 503 (the relay retries those)
    processed: int = 0
    duplicated: int = 0
    lost: int = 0
    extra: dict[str, object] = field(default_factory=dict)

    def report(self) -> str:
        figures = (
            f"sent={self.sent} acknowledged={self.acknowledged} refused_503={self.refused} "
            f"processed={self.processed} duplicated={self.duplicated} lost={self.lost}"
        )
        extra = " ".join(f"{k}={v}" for k, v in self.extra.items())
        line = f"[faults] {self.name}: injected: {'; '.join(self.injected)} | {figures} {extra}"
        line = line.rstrip()
        print(line)
        REPORTS.append(line)
        return line


async def unhandled_events(sessions: SessionFactory) -> int:
    async with sessions() as session:
        count = await session.scalar(text("SELECT count(*) FROM inbox WHERE handled_at IS NULL"))
    return int(count or 0)


async def wait_until_drained(redis: Redis, sessions: SessionFactory) -> None:
    """Until the queue holds no job but cron jobs and every recorded event is handled (a
    restarted worker finished what the killed one left). A cron job is not the turns' work:
    one the kill caught (the startup sweep, on a loaded machine) stays queued until its
    in-progress key lapses (110 s: the longest job timeout + 10 s), and each due one is
    queued while it runs."""

    async def settled() -> bool:
        queued = await redis.zrange("arq:queue", 0, -1)
        turns_work = [job for job in queued if not job.startswith(b"cron:")]
        return not turns_work and await unhandled_events(sessions) == 0

    try:
        await wait_until(settled, within=60, what="the restarted worker to finish")
    except AssertionError:
        print(await what_is_pending(redis, sessions))
        raise


async def what_is_pending(redis: Redis, sessions: SessionFactory) -> str:
    """For a drain that never came: the queue, the unhandled events and every other
    connection to the database (what it waits on, and the opening of its statement, which
    carries parameters, never their values)."""
    queued = await redis.zrange("arq:queue", 0, -1, withscores=True)
    async with sessions() as session:
        events = (
            await session.execute(
                text(
                    "SELECT id, attempts, next_attempt_at, last_error FROM inbox "
                    "WHERE handled_at IS NULL"
                )
            )
        ).all()
        backends = (
            await session.execute(
                text(
                    "SELECT pid, state, wait_event_type, wait_event, backend_xid IS NOT NULL, "
                    "now() - xact_start, left(query, 60) FROM pg_stat_activity "
                    "WHERE datname = current_database() AND pid <> pg_backend_pid()"
                )
            )
        ).all()
    lines = [f"queued: {queued}", f"unhandled: {events}", *(f"backend: {b}" for b in backends)]
    return "\n".join(lines)


async def sweep_until_handled(
    worker: WorkerProcess, sessions: SessionFactory, queue: ArqQueue
) -> list[int]:
    """What the minute cron does, without its 45 s grace, until every recorded event is
    handled: re-enqueue the unfinished (jobs that died with Redis or Postgres). Returns how
    many events each sweep found unfinished."""
    swept: list[int] = []

    async def drained() -> bool:
        worker.revive()
        swept.append(await sweep_inbox(sessions, queue, grace_s=0))
        idle = await queue.redis.zcard("arq:queue") == 0
        return idle and await unhandled_events(sessions) == 0

    await wait_until(drained, within=90, what="every recorded event to be handled")
    return swept


async def handled_count(sessions: SessionFactory, *, at_least: int) -> bool:
    async with sessions() as session:
        count = await session.scalar(
            text("SELECT count(*) FROM inbox WHERE handled_at IS NOT NULL")
        )
    return int(count or 0) >= at_least


async def count_outcomes(
    tally: Tally,
    sessions: SessionFactory,
    discord: FakeDiscord,
    acknowledged: Iterable[int],
    addressed: set[int],
) -> None:
    """Fill processed/duplicated/lost for the acknowledged message ids.

    Processed: the inbox row is handled, the message is in the channel log, and an addressed
    message has its reply. Duplicated: every reply or reaction beyond the first per message."""
    ids = sorted(set(acknowledged))
    async with sessions() as session:
        logged = {
            row[0]
            for row in await session.execute(
                text("SELECT id FROM messages WHERE id = ANY(:ids)"), {"ids": ids}
            )
        }
        handled = {
            int(row[0])
            for row in await session.execute(
                text("SELECT id FROM inbox WHERE handled_at IS NOT NULL AND id = ANY(:ids)"),
                {"ids": [str(i) for i in ids]},
            )
        }
    replies = Counter(
        int(m["message_reference"]["message_id"])
        for m in discord.posted
        if m.get("message_reference")
    )
    reactions = Counter(r.message_id for r in discord.reactions)
    done = [
        i for i in ids if i in logged and i in handled and (i not in addressed or replies[i] >= 1)
    ]
    tally.processed = len(done)
    tally.lost = len(ids) - len(done)
    tally.duplicated = sum(max(0, n - 1) for n in replies.values()) + sum(
        max(0, n - 1) for n in reactions.values()
    )
    tally.extra["unasked_replies"] = len([i for i in replies if i not in addressed])
