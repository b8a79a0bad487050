"""The nightly consolidation run: a chain of bounded, resumable steps, one ARQ job each.

``plan`` → ``extract:<n>`` (one chunk each) → ``retention`` (MEM-06, when configured) →
``decay:<n>`` (five reviews each) → ``diary`` → ``style:<n>`` (one guild each) → ``finish``.
The run row's ``summary.progress.next`` (app/nightly/progress.py) names the one pending step;
a job for any other step is a duplicate and does nothing, so replays and retries are harmless."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Collection
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from typing import Any

from prometheus_client import Counter, Gauge
from sqlalchemy import text
from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import AsyncSession

from app.db import SessionFactory, unit_of_work
from app.kit.clock import jst_day, previous_day_window, utcnow
from app.kit.logs import log_context
from app.kit.queue import Job, JobQueue
from app.kit.spend import Spend, spend_scope
from app.memory import store
from app.nightly import store as runs
from app.nightly.progress import FIRST_STEP, Progress
from app.nightly.steps import RunView, StepResult, run_step
from app.privacy import store as register
from app.services import Services
from app.structured.retention import ACTOR as RETENTION_ACTOR
from app.vocabulary import Action, Actor, NightlyStep

logger = logging.getLogger(__name__)

JOB_NAME = "nightly_step"
ACTOR = Actor.NIGHTLY  # the ledger actor of the run's extraction and decay
# A running run whose last step ended longer ago than this has lost its chain (a job died
# after its commit, or Redis refused the next enqueue): the sweeper re-enqueues the step.
STALL_AFTER = timedelta(minutes=3)
GIVE_UP_AFTER = timedelta(hours=2)
RUN_LOCK_WAIT_MS = 10_000
COUNTERS = ("decision_calls", "model_calls", "input_tokens", "output_tokens")
CHANGE_LISTS = ("added", "updated", "deleted", "decayed", "expired")


def step_job_id(run_id: int, step: NightlyStep) -> str:
    return f"nightly:{run_id}:{step}"


def empty_summary() -> dict[str, Any]:
    return {
        **{name: [] for name in CHANGE_LISTS},
        "errors": [],
        **dict.fromkeys(COUNTERS, 0),
        "progress": Progress().stored(),
    }


# --- starting a run ----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Started:
    """The run exists; ``queued`` is False when its first job could not be enqueued (the
    sweeper's ``resume_nightly_runs`` picks such a run up once it counts as stalled)."""

    run_id: int
    day: date
    queued: bool = True


@dataclass(frozen=True, slots=True)
class AlreadyRan:
    run_id: int
    day: date


async def start_nightly_run(
    sessions: SessionFactory, queue: JobQueue, *, now: datetime
) -> Started | AlreadyRan:
    """Create the JST day's run over the 24 hours before ``now`` and enqueue its first step.

    The day label is unique among live runs, so racing callers produce exactly one run."""
    day = jst_day(now)
    start, end = previous_day_window(now)
    for _ in range(3):
        async with unit_of_work(sessions) as session:
            run_id = await runs.create_live(
                session, day=day, start=start, end=end, summary=empty_summary()
            )
            if run_id is None:
                run_id = await runs.live_run_id(session, day)
                if run_id is None:
                    continue  # the live run was rolled back in between: try again
                return AlreadyRan(run_id, day)
        logger.info("nightly run started", extra={"run_id": run_id, "day": day.isoformat()})
        try:
            send = NIGHTLY_STEP.send(queue, step_job_id(run_id, FIRST_STEP))
            await send(run_id, str(FIRST_STEP))
        except Exception:
            logger.warning("nightly run not queued; the sweeper will resume it", exc_info=True)
            return Started(run_id, day, queued=False)
        return Started(run_id, day)
    raise RuntimeError(f"could not create or find the nightly run for {day}")


# --- the step runner ---------------------------------------------------------------------


@asynccontextmanager
async def _run_lock(sessions: SessionFactory, run_id: int) -> AsyncIterator[bool]:
    """Hold the run's lock for a whole step (rollback waits on it); False when it stays busy.

    Transaction-scoped on a session of its own, so a killed worker's lock dies with it. A
    short wait lets a step outlast a dry-run rollback instead of dropping out of the chain."""
    async with sessions() as session, session.begin():
        await session.execute(text(f"SET LOCAL lock_timeout = '{RUN_LOCK_WAIT_MS}ms'"))
        try:
            await runs.lock_run(session, run_id)
        except DBAPIError:  # lock_timeout: another step (or a rollback) holds the run
            yield False
            return
        yield True


async def nightly_step(services: Services, run_id: int, step: str) -> str | None:
    """Do ``step`` of run ``run_id`` if it is the pending one; enqueue and return the next.

    The step travels as its text (``extract:3``): a job's arguments are JSON."""
    with log_context(run_id=run_id, nightly_step=step):
        try:
            pending = NightlyStep.parse(step)
        except ValueError:
            logger.error("nightly step job for an unknown step: dropped")
            return None
        async with _run_lock(services.sessions, run_id) as held:
            if not held:
                logger.info("nightly step skipped: another worker holds the run")
                return None
            run = await _pending_run(services.sessions, run_id, pending)
            if run is None:
                return None
            with spend_scope() as spend:
                try:
                    result = await run_step(services, run, pending)
                except Exception as exc:
                    logger.exception("nightly step crashed; the run is marked failed")
                    await _fail(services.sessions, run_id, f"{step}: {type(exc).__name__}", spend)
                    return None
            await _record(services.sessions, run_id, result, spend)
        if result.next is None:
            return None
        send = NIGHTLY_STEP.send(services.queue, step_job_id(run_id, result.next))
        await send(run_id, str(result.next))
        return str(result.next)


NIGHTLY_STEP = Job(JOB_NAME, nightly_step)


async def _pending_run(sessions: SessionFactory, run_id: int, step: NightlyStep) -> RunView | None:
    async with sessions() as session:
        run = await runs.get(session, run_id)
    if run is None or run.status != "running" or run.rolled_back_at is not None:
        return None
    progress = Progress.of(run.summary)
    if progress.next != step or run.window_start is None or run.window_end is None:
        return None  # a duplicate or stale job: that step is done (or not yet due)
    return RunView(run.id, run.window_start, run.window_end, progress)


# --- bookkeeping -------------------------------------------------------------------------


def change_lists(
    changes: list[tuple[int, Actor, Action]], stale: Collection[int]
) -> dict[str, list[int]]:
    """Pure: the run's ledger changes as the summary's id lists, by who made them and what
    they did: retention's deletes expired; the run's deletes of the memories its decay
    review was given (``stale``) decayed, its others deleted."""
    lists: dict[str, list[int]] = {name: [] for name in CHANGE_LISTS}
    for memory_id, actor, action in changes:
        if action is Action.DELETE and actor is Actor.RETENTION:
            name = "expired"
        elif action is Action.DELETE:
            name = "decayed" if memory_id in stale else "deleted"
        else:
            name = "added" if action is Action.ADD else "updated"
        if memory_id not in lists[name]:
            lists[name].append(memory_id)
    return lists


async def run_changes(
    session: AsyncSession, run_id: int, progress: Progress
) -> dict[str, list[int]]:
    """The run's changes as the ledger has them: the summary's id lists."""
    actors = (ACTOR, RETENTION_ACTOR)
    stale = set(progress.stale or ())
    return change_lists(await store.run_changes(session, run_id, actors), stale)


def _add_spend(summary: dict[str, Any], spend: Spend) -> None:
    for name, value in zip(
        COUNTERS,
        (spend.decision_calls, spend.model_calls, spend.input_tokens, spend.output_tokens),
        strict=True,
    ):
        summary[name] = int(summary.get(name, 0)) + value


async def _record(sessions: SessionFactory, run_id: int, result: StepResult, spend: Spend) -> None:
    """Store the step's outcome and the next pending step in one commit."""
    async with unit_of_work(sessions) as session:
        run = await runs.get(session, run_id, for_update=True)
        assert run is not None
        summary = dict(run.summary)
        _add_spend(summary, spend)
        summary["errors"] = [*summary.get("errors", []), *result.errors]
        progress = (result.progress or Progress.of(summary)).model_copy(
            update={"next": result.next, "beat": utcnow()}
        )
        summary["progress"] = progress.stored()
        summary.update(await run_changes(session, run_id, progress))
        values: dict[str, Any] = {"summary": summary}
        if result.diary is not None:
            values.update(await _diary(session, result, summary))
        if result.next is None:
            values.update(status="finished", finished_at=utcnow())
        await runs.save(session, run_id, **values)
    if result.next is None:
        report_run("finished", summary)


async def _diary(
    session: AsyncSession, result: StepResult, summary: dict[str, Any]
) -> dict[str, Any]:
    """The diary and its recorded inputs, unless one of its authors is being erased since
    their messages were read (then it is withheld, and the summary says so)."""
    if await register.blocked(session, result.diary_sources, since=result.read_at):
        summary["errors"] = [*summary["errors"], "diary: withheld, a source was erased"]
        return {}
    return {"diary": result.diary, "diary_user_ids": result.diary_sources}


async def _fail(sessions: SessionFactory, run_id: int, error: str, spend: Spend) -> None:
    """The run stops here; what it changed stays logged under its id, so it can be rolled back."""
    async with unit_of_work(sessions) as session:
        run = await runs.get(session, run_id, for_update=True)
        if run is None or run.status != "running":
            return
        summary = dict(run.summary)
        _add_spend(summary, spend)
        summary["errors"] = [*summary.get("errors", []), error]
        summary.update(await run_changes(session, run_id, Progress.of(summary)))
        await runs.save(session, run_id, summary=summary, status="failed", finished_at=utcnow())
    report_run("failed", summary)


NIGHTLY_RUNS = Counter("nightly_runs_total", "Nightly runs that ended, by status", ["status"])
NIGHTLY_LAST = Gauge(
    "nightly_last_run", "Figures of the last nightly run this worker ended", ["figure"]
)


def report_run(status: str, summary: dict[str, Any]) -> None:
    """Export an ended run's figures: its changes, errors and what it spent."""
    NIGHTLY_RUNS.labels(status=status).inc()
    for name in CHANGE_LISTS:
        NIGHTLY_LAST.labels(figure=name).set(len(summary.get(name, [])))
    NIGHTLY_LAST.labels(figure="errors").set(len(summary.get("errors", [])))
    for name in COUNTERS:
        NIGHTLY_LAST.labels(figure=name).set(int(summary.get(name, 0)))


async def resume_nightly_runs(
    sessions: SessionFactory, queue: JobQueue, *, now: datetime
) -> list[int]:
    """Re-enqueue the pending step of runs whose chain broke; give up (failed) on a run that
    has made no progress for GIVE_UP_AFTER despite that.

    A cron calls this every minute. A resumed step that is in fact queued or running is
    harmless: it waits for the run lock, then finds its step no longer pending."""
    resumed: list[tuple[int, NightlyStep]] = []
    async with unit_of_work(sessions) as session:
        for run in await runs.running_unlocked(session):
            progress = Progress.of(run.summary)
            progressed = progress.beat or run.started_at
            touched = max(progressed, progress.resumed_at or progressed)
            pending = progress.next
            if touched > now - STALL_AFTER or pending is None:
                continue
            summary = dict(run.summary)
            if progressed < now - GIVE_UP_AFTER:
                summary["errors"] = [*summary.get("errors", []), "stalled: gave up resuming"]
                summary.update(await run_changes(session, run.id, progress))
                await runs.save(session, run.id, summary=summary, status="failed", finished_at=now)
                continue
            progress = progress.model_copy(
                update={"resumes": progress.resumes + 1, "resumed_at": now}
            )
            summary["progress"] = progress.stored()
            await runs.save(session, run.id, summary=summary)
            resumed.append((run.id, pending))
    for run_id, step in resumed:
        job_id = f"{step_job_id(run_id, step)}:resume{now.timestamp():.0f}"
        await NIGHTLY_STEP.send(queue, job_id)(run_id, str(step))
    return [run_id for run_id, _ in resumed]
