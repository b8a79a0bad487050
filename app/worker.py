"""The worker process: `python -m app worker`. The only module that wires ARQ's jobs.

``build_worker`` makes the one worker class (``ResilientWorker``) that every entry point runs;
there is no ``WorkerSettings`` for ``arq`` to build a plain ARQ worker from. Every job is a
few lines calling a domain function with explicit Services. Job timeouts stay
at or under 100 s: ARQ retries a dead worker's job once its in-progress key lapses (the
longest job timeout + 10 s), which keeps recovery within the contract's two minutes."""

from __future__ import annotations

import asyncio
import logging
import signal
import sys
import time
from contextlib import AsyncExitStack
from datetime import timedelta, timezone
from typing import Any, ParamSpec, TypedDict, cast

from arq import cron, func
from arq.connections import ArqRedis
from arq.cron import CronJob
from arq.typing import WorkerCoroutine
from arq.worker import Function

from app.channel.store import prune_tombstones
from app.config import Settings, SettingsError, load_settings
from app.db import unit_of_work
from app.inbound.acknowledge import ACKNOWLEDGE
from app.inbound.store import (
    DEDUPE_WINDOW,
    PROCESS_EVENT,
    enqueue_due,
    prune_inbox,
    sweep_inbox,
)
from app.kit.arqueue import ArqQueue, dump_job, load_job, redis_client
from app.kit.arqworker import REDIS_FAILURES, ResilientWorker
from app.kit.clock import utcnow
from app.kit.heap import freeze_startup_objects
from app.kit.jobs import INBOX_BACKLOG, instrumented
from app.kit.logs import configure_logging
from app.kit.loop import run_main
from app.kit.probes import start_probe_server
from app.kit.queue import Job
from app.meaning.backfill import backfill
from app.memory import jobs as memory_jobs
from app.memory.jobs import REMEMBER
from app.memory.ledger_retention import redact_old_ledger_content, roll_up_old_reads
from app.nightly import run as nightly
from app.nightly.run import NIGHTLY_STEP
from app.privacy import erasure, samples
from app.privacy.erasure import ERASE
from app.services import Services
from app.structured.consolidation import CONSOLIDATE
from app.turn.events import handle_event
from app.usage.meter import metered
from app.wiring import open_services

P = ParamSpec("P")
JOB_TIMEOUT_S = 100
JST = timezone(timedelta(hours=9))

log = logging.getLogger("app.worker")


class WorkerContext(TypedDict):
    settings: Settings
    own_process: bool
    services: Services
    stack: AsyncExitStack


def _services(ctx: dict[str, Any]) -> Services:
    return cast(WorkerContext, ctx)["services"]


async def startup(ctx: dict[str, Any]) -> None:
    settings: Settings = ctx["settings"]
    stack = AsyncExitStack()
    services = await stack.enter_async_context(
        open_services(settings, queue=ArqQueue(ctx["redis"]))
    )
    ctx.update(services=services, stack=stack)
    if ctx.get("own_process"):  # not a worker a test or the dev stack made
        freeze_startup_objects()


async def shutdown(ctx: dict[str, Any]) -> None:
    stack: AsyncExitStack | None = ctx.get("stack")
    if stack is not None:
        await stack.aclose()


@instrumented("process_event")
async def process_event(ctx: dict[str, Any], event_id: str) -> None:
    deadline = time.monotonic() + JOB_TIMEOUT_S  # when ARQ kills this job
    services = _services(ctx)
    async with metered(services.sessions):
        await handle_event(services, event_id, deadline=deadline)


def _task(job: Job[P], metric: str) -> WorkerCoroutine:
    """ARQ's function for ``job``: its body with this worker's services, instrumented and
    metered (its model calls become usage rows)."""

    @instrumented(metric)
    async def run(ctx: dict[str, Any], *args: P.args, **kwargs: P.kwargs) -> None:
        services = _services(ctx)
        async with metered(services.sessions):
            await job.body(services, *args, **kwargs)

    return run


@instrumented("start_night")
async def start_night(ctx: dict[str, Any]) -> None:
    """03:00 JST: consolidate the previous 24 hours (one run per JST day, however many
    workers race for it: the day label is unique among live runs)."""
    services = _services(ctx)
    await nightly.start_nightly_run(services.sessions, services.queue, now=utcnow())


@instrumented("sweep")
async def sweep(ctx: dict[str, Any]) -> None:
    """Every minute: re-enqueue unfinished events and broken nightly chains, stop idle
    sandboxes."""
    services = _services(ctx)
    INBOX_BACKLOG.set(await sweep_inbox(services.sessions, services.queue))
    await nightly.resume_nightly_runs(services.sessions, services.queue, now=utcnow())
    await memory_jobs.resume_lost_memory_jobs(services)
    await erasure.resume_erasures(services)
    if services.agent is not None:
        await services.agent.stop_idle(utcnow())


@instrumented("retry")
async def retry_due(ctx: dict[str, Any]) -> None:
    """Every 10 s: enqueue the events whose backed-off retry is due (seconds-scale pauses)."""
    services = _services(ctx)
    await enqueue_due(services.sessions, services.queue)


@instrumented("embed_backlog")
async def embed_backlog(ctx: dict[str, Any]) -> None:
    """Every minute (with EMBEDDINGS_BASE_URL): vectors for the rows that wait for one (its
    embeddings calls are nobody's in the usage rows: upkeep, as the nightly diary is)."""
    services = _services(ctx)
    async with metered(services.sessions):
        await backfill(services)


@instrumented("prune")
async def prune(ctx: dict[str, Any]) -> None:
    """04:30 JST: the de-duplication window, the budget figures erasures kept that no longer
    count, then (when LEDGER_CONTENT_DAYS is set) the ledger's old memory text and (when
    LEDGER_READ_ROLLUP_DAYS is set) its old reads; last, the planner's samples, so words
    forgotten, edited, redacted or pruned during the day leave pg_statistic within a day."""
    services = _services(ctx)
    await prune_inbox(services.sessions)
    await erasure.forget_spent(services.sessions)
    async with unit_of_work(services.sessions) as session:  # they expire with the window
        await prune_tombstones(session, older_than=DEDUPE_WINDOW)
    await redact_old_ledger_content(
        services.sessions, days=services.settings.ledger_content_days, now=utcnow()
    )
    await roll_up_old_reads(
        services.sessions, days=services.settings.ledger_read_rollup_days, now=utcnow()
    )
    await samples.refresh_all(services.sessions)


POLL_DELAY_S = 0.5  # only the fallback poll: every enqueue wakes the workers at once


def _functions() -> list[Function]:
    return [
        func(process_event, name=PROCESS_EVENT, timeout=JOB_TIMEOUT_S, keep_result=0),
        *(
            func(_task(job, metric), name=job.name, timeout=JOB_TIMEOUT_S, keep_result=0)
            for job, metric in (
                (REMEMBER, "remember"),
                (NIGHTLY_STEP, "nightly_step"),
                (CONSOLIDATE, "consolidate"),
                (ERASE, "erase_person"),
            )
        ),
        # Only a deferral, in Discord's three seconds: never retried, done in seconds.
        func(
            _task(ACKNOWLEDGE, "acknowledge_interaction"),
            name=ACKNOWLEDGE.name,
            timeout=10,
            keep_result=0,
            max_tries=1,
        ),
    ]


def _cron_jobs() -> list[CronJob]:
    """Fresh per worker: a cron job keeps its next run time on itself."""
    return [
        cron(sweep, second=0, run_at_startup=True, timeout=60, keep_result=0),
        cron(retry_due, second=set(range(5, 60, 10)), timeout=10, keep_result=0),
        cron(embed_backlog, second=30, timeout=60, keep_result=0),
        cron(prune, hour=4, minute=30, second=0, timeout=60, keep_result=0),
        cron(start_night, hour=3, minute=0, second=0, timeout=60, keep_result=0),
    ]


def build_worker(
    settings: Settings,
    *,
    redis: ArqRedis | None = None,
    own_process: bool = False,
    **options: Any,
) -> ResilientWorker:
    """The worker every entry point runs (the process, the dev stack, tests, benchmarks);
    ``options`` override ARQ's (``burst``, ``poll_delay``, ``cron_jobs``…)."""
    arguments: dict[str, Any] = {
        "functions": _functions(),
        "cron_jobs": _cron_jobs(),
        "redis_pool": redis or worker_redis(settings),
        "on_startup": startup,
        "on_shutdown": shutdown,
        "ctx": {"settings": settings, "own_process": own_process},
        "handle_signals": False,  # the process installs its own (drain, then exit)
        "job_timeout": JOB_TIMEOUT_S,
        "max_jobs": settings.worker_max_jobs,
        "poll_delay": POLL_DELAY_S,
        "timezone": JST,
        "job_serializer": dump_job,  # JSON, the same format the API's queue writes
        "job_deserializer": load_job,
        "drain_grace_s": settings.worker_drain_grace_s,
    }
    return ResilientWorker(**{**arguments, **options})


def worker_redis(settings: Settings) -> ArqRedis:
    """No read timeout: the worker's pub/sub connection waits for wake-ups indefinitely."""
    return redis_client(settings.redis_target, socket_timeout=None, max_connections=None)


# -- the process: python -m app worker ---------------------------------------------------

REDIS_TRIES = 5  # at start: then give up (exit 1) and let the supervisor restart the worker
LIVENESS_S = 60.0  # the loop turns at least every poll delay, or every 2 s during an outage


def main(**options: Any) -> int:
    """Refuse an unsafe configuration (exit 2) before touching Redis; run until SIGTERM or
    SIGINT, drain, exit 0. ``options`` as for ``build_worker`` (benchmarks only)."""
    try:
        settings = load_settings()
    except SettingsError as exc:
        print(str(exc), file=sys.stderr)
        return 2
    configure_logging()
    return run_main(serve(settings, **options))


async def serve(settings: Settings, **options: Any) -> int:
    redis = worker_redis(settings)
    if not await _reach(redis):
        await redis.aclose()
        return 1
    worker = build_worker(settings, redis=redis, own_process=True, **options)
    start_probe_server(
        settings.worker_metrics_port,
        lambda: time.monotonic() - worker.last_iteration < LIVENESS_S,
    )
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, worker.drain)
    try:
        await worker.async_run()
    except asyncio.CancelledError:
        if not worker.draining:
            raise
    finally:
        await worker.close()
    return 0


async def _reach(redis: ArqRedis) -> bool:
    for attempt in range(1, REDIS_TRIES + 1):
        try:
            await redis.ping()
            return True
        except REDIS_FAILURES as exc:
            log.warning(
                "Redis unreachable at start",
                extra={"attempt": attempt, "of": REDIS_TRIES, "error": type(exc).__name__},
            )
            if attempt < REDIS_TRIES:
                await asyncio.sleep(1.0)
    log.error("Redis unreachable at start; giving up")
    return False
