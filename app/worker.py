"""The worker process: `arq app.worker.WorkerSettings`. The only module that wires ARQ.

Every job is a few lines calling a domain function with explicit Services. Job timeouts stay
at or under 100 s: ARQ retries a dead worker's job once its in-progress key lapses (the
longest job timeout + 10 s), which keeps recovery within the contract's two minutes."""

from __future__ import annotations

import time
from contextlib import AsyncExitStack
from datetime import timedelta, timezone
from typing import Any, TypedDict, cast

from arq import cron, func
from arq.connections import RedisSettings
from prometheus_client import start_http_server
from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

from app.channel.log import prune_tombstones
from app.config import Settings, get_settings
from app.db import unit_of_work
from app.inbound.inbox import (
    DEDUPE_WINDOW,
    PROCESS_EVENT,
    enqueue_due,
    prune_inbox,
    sweep_inbox,
)
from app.inbound.steps import PostedReply
from app.kit.arqueue import ArqQueue, dump_job, load_job
from app.kit.arqworker import adopt_worker
from app.kit.clock import utcnow
from app.kit.heap import freeze_startup_objects
from app.kit.jobs import INBOX_BACKLOG, instrumented
from app.kit.logs import configure_logging
from app.memory import jobs as memory_jobs
from app.memory.jobs import REMEMBER
from app.memory.ledger_retention import redact_old_ledger_content
from app.nightly import run as nightly
from app.privacy import erasure
from app.services import Services
from app.structured.consolidation import JOB_NAME as CONSOLIDATE
from app.structured.consolidation import consolidate_channel
from app.turn.events import handle_event
from app.wiring import open_services

JOB_TIMEOUT_S = 100
JST = timezone(timedelta(hours=9))


class WorkerContext(TypedDict):
    settings: Settings
    services: Services
    stack: AsyncExitStack


def _services(ctx: dict[str, Any]) -> Services:
    return cast(WorkerContext, ctx)["services"]


async def startup(ctx: dict[str, Any]) -> None:
    adopt_worker()  # however ARQ was started: ride out Redis outages in this process
    settings: Settings = ctx.get("settings") or get_settings()
    own_process = not ctx.get("settings")  # not a worker a test or the dev stack made
    if own_process:
        configure_logging()
        start_http_server(settings.worker_metrics_port)
    stack = AsyncExitStack()
    services = await stack.enter_async_context(
        open_services(settings, queue=ArqQueue(ctx["redis"]))
    )
    ctx.update(settings=settings, services=services, stack=stack)
    if own_process:
        freeze_startup_objects()


async def shutdown(ctx: dict[str, Any]) -> None:
    stack: AsyncExitStack | None = ctx.get("stack")
    if stack is not None:
        await stack.aclose()


@instrumented("process_event")
async def process_event(ctx: dict[str, Any], event_id: str) -> None:
    deadline = time.monotonic() + JOB_TIMEOUT_S  # when ARQ kills this job
    await handle_event(_services(ctx), event_id, deadline=deadline)


@instrumented("remember")
async def remember(
    ctx: dict[str, Any],
    channel_id: int,
    trigger_message_id: int,
    reply_message_id: int | None,
    speaker_id: int,
) -> None:
    reply = PostedReply(trigger_message_id, channel_id, speaker_id, reply_message_id)
    await memory_jobs.remember_after_reply(_services(ctx), reply)


@instrumented("consolidate")
async def consolidate(ctx: dict[str, Any], channel_id: int) -> None:
    await consolidate_channel(_services(ctx), channel_id)


@instrumented("nightly_step")
async def nightly_step(ctx: dict[str, Any], run_id: int, step: str) -> None:
    await nightly.nightly_step(_services(ctx), run_id, step)


@instrumented("erase_person")
async def erase_person(ctx: dict[str, Any], erasure_id: int) -> None:
    await erasure.run_erasure(_services(ctx), erasure_id)


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


@instrumented("prune")
async def prune(ctx: dict[str, Any]) -> None:
    """04:30 JST: the de-duplication window, then (when LEDGER_CONTENT_DAYS is set) the
    ledger's old memory text."""
    services = _services(ctx)
    await prune_inbox(services.sessions)
    async with unit_of_work(services.sessions) as session:  # they expire with the window
        await prune_tombstones(session, older_than=DEDUPE_WINDOW)
    await redact_old_ledger_content(
        services.sessions, days=services.settings.ledger_content_days, now=utcnow()
    )


class _ArqSettings(BaseSettings):
    """Read at import (ARQ needs them on the class) without demanding the other secrets."""

    model_config = SettingsConfigDict(env_file=".env", extra="ignore")
    redis_url: str = "redis://localhost:6379/0"
    # Jobs one worker process runs at once (docs/operations.md, "Sizing").
    worker_max_jobs: int = Field(default=20, ge=1)


_ARQ = _ArqSettings()


class WorkerSettings:
    functions = [  # noqa: RUF012 (ARQ reads these class attributes)
        func(process_event, name=PROCESS_EVENT, timeout=JOB_TIMEOUT_S, keep_result=0),
        func(remember, name=REMEMBER, timeout=JOB_TIMEOUT_S, keep_result=0),
        func(nightly_step, name=nightly.JOB_NAME, timeout=JOB_TIMEOUT_S, keep_result=0),
        func(consolidate, name=CONSOLIDATE, timeout=JOB_TIMEOUT_S, keep_result=0),
        func(erase_person, name=erasure.JOB_NAME, timeout=JOB_TIMEOUT_S, keep_result=0),
    ]
    cron_jobs = [  # noqa: RUF012
        cron(sweep, second=0, run_at_startup=True, timeout=60, keep_result=0),
        cron(retry_due, second=set(range(5, 60, 10)), timeout=10, keep_result=0),
        cron(prune, hour=4, minute=30, second=0, timeout=60, keep_result=0),
        cron(start_night, hour=3, minute=0, second=0, timeout=60, keep_result=0),
    ]
    on_startup = startup
    on_shutdown = shutdown
    job_timeout = JOB_TIMEOUT_S
    max_jobs = _ARQ.worker_max_jobs
    # Every enqueue wakes the workers at once (ResilientWorker, app.kit.arqueue); this is
    # only the fallback poll, for a wake-up that was lost, and what an idle worker costs.
    poll_delay = 0.5
    timezone = JST
    redis_settings = RedisSettings.from_dsn(_ARQ.redis_url)
    job_serializer = dump_job  # JSON, the same format the API's queue writes
    job_deserializer = load_job
