"""The nightly consolidation run: a chain of bounded, resumable steps, one ARQ job each.

``plan`` → ``extract:<n>`` (one chunk each) → ``retention`` (MEM-06, when configured) →
``decay:<n>`` (five reviews each) → ``diary`` → ``style`` → ``finish``. The run row's
``summary.progress.next`` names the one pending step; a job for any other step is a duplicate
and does nothing, so replays and retries are harmless."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Iterable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from typing import Any

from prometheus_client import Counter, Gauge
from sqlalchemy import Select, func, select, text
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm import aliased

from app.chat.base import ChatFailed
from app.db import SessionFactory, unit_of_work
from app.kit.clock import jst_day, previous_day_window, utcnow
from app.kit.locks import xact_lock
from app.kit.logs import log_context
from app.kit.queue import JobQueue
from app.kit.spend import Spend, spend_scope
from app.memory import ledger
from app.memory.decay import DECAY_REASON, STALE_AFTER, STALE_CAP, review_stale, stale_memory_ids
from app.memory.diary import last_messages, write_diary
from app.memory.exchange import Exchange, Line
from app.memory.retention import ACTOR as RETENTION_ACTOR
from app.memory.retention import REASON as RETENTION_REASON
from app.memory.retention import purge_expired
from app.memory.rollback import RUN_LOCK
from app.memory.style import current_style, revise_style, window_signals
from app.memory.write_path import run_write_path
from app.models.memory import MemoryLog
from app.models.messages import Message
from app.models.nightly import NightlyRun, StyleOverride
from app.services import Services
from app.turn.commands import parse_command

logger = logging.getLogger(__name__)

JOB_NAME = "nightly_step"
RESUME_JOB_NAME = "nightly_resume"
FIRST_STEP = "plan"
CHUNK_SIZE = 6
CHUNKS_PER_SPEAKER = 5
DECAY_BATCH = 5
# A running run whose last step ended longer ago than this has lost its chain (a job died
# after its commit, or Redis refused the next enqueue): the sweeper re-enqueues the step.
STALL_AFTER = timedelta(minutes=3)
GIVE_UP_AFTER = timedelta(hours=2)
RUN_LOCK_WAIT_MS = 10_000
# Jobs are killed at 100 s. A slow model (timeouts × SDK retries) must end as a noted
# failure of that piece, not as a killed job, so each model-calling piece gets this budget.
STEP_BUDGET_S = 75.0
COUNTERS = ("decision_calls", "model_calls", "input_tokens", "output_tokens")
CHANGE_LISTS = ("added", "updated", "deleted", "decayed", "expired")


# --- pure planning -----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class WindowMessage:
    id: int
    author_id: int
    author_name: str
    content: str
    created_at: datetime
    is_bot: bool = False
    deleted: bool = False


def plan_chunks(messages: Iterable[WindowMessage]) -> dict[int, list[list[WindowMessage]]]:
    """Human messages by speaker, in sixes cut from the newest end, newest five chunks kept.

    Chunks come oldest first so a later chunk can update what an earlier one added."""
    by_speaker: dict[int, list[WindowMessage]] = {}
    for message in sorted(messages, key=lambda m: (m.created_at, m.id)):
        if message.is_bot or message.deleted or not message.content.strip():
            continue
        by_speaker.setdefault(message.author_id, []).append(message)
    plan: dict[int, list[list[WindowMessage]]] = {}
    for speaker, said in by_speaker.items():
        chunks: list[list[WindowMessage]] = []
        end = len(said)
        while end > 0 and len(chunks) < CHUNKS_PER_SPEAKER:
            chunks.append(said[max(0, end - CHUNK_SIZE) : end])
            end -= CHUNK_SIZE
        plan[speaker] = chunks[::-1]
    return plan


def parse_step(step: str) -> tuple[str, int]:
    name, _, index = step.partition(":")
    return name, int(index) if index else 0


def step_job_id(run_id: int, step: str) -> str:
    return f"nightly:{run_id}:{step}"


def empty_summary() -> dict[str, Any]:
    return {
        **{name: [] for name in CHANGE_LISTS},
        "errors": [],
        **dict.fromkeys(COUNTERS, 0),
        "progress": {"next": FIRST_STEP, "resumes": 0},
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

    The partial unique index on ``day`` makes racing callers produce exactly one run."""
    day = jst_day(now)
    start, end = previous_day_window(now)
    for _ in range(3):
        async with unit_of_work(sessions) as session:
            run_id = await session.scalar(
                insert(NightlyRun)
                .values(
                    day=day,
                    window_start=start,
                    window_end=end,
                    summary=empty_summary(),
                )
                .on_conflict_do_nothing(
                    index_elements=[NightlyRun.day],
                    index_where=NightlyRun.rolled_back_at.is_(None),
                )
                .returning(NightlyRun.id)
            )
            if run_id is None:
                run_id = await _live_run(session, day)
                if run_id is None:
                    continue  # the live run was rolled back in between: try again
                return AlreadyRan(run_id, day)
        logger.info("nightly run started", extra={"run_id": run_id, "day": day.isoformat()})
        try:
            await queue.enqueue(
                JOB_NAME, run_id, FIRST_STEP, job_id=step_job_id(run_id, FIRST_STEP)
            )
        except Exception:
            logger.warning("nightly run not queued; the sweeper will resume it", exc_info=True)
            return Started(run_id, day, queued=False)
        return Started(run_id, day)
    raise RuntimeError(f"could not create or find the nightly run for {day}")


async def _live_run(session: AsyncSession, day: date) -> int | None:
    run_id: int | None = await session.scalar(
        select(NightlyRun.id).where(NightlyRun.day == day, NightlyRun.rolled_back_at.is_(None))
    )
    return run_id


# --- the step runner ---------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class RunView:
    id: int
    window_start: datetime
    window_end: datetime
    progress: dict[str, Any]


@dataclass
class StepResult:
    next: str | None
    errors: list[str] = field(default_factory=list)
    progress: dict[str, Any] = field(default_factory=dict)
    diary: str | None = None


@asynccontextmanager
async def _run_lock(sessions: SessionFactory, run_id: int) -> AsyncIterator[bool]:
    """Hold the run's lock for a whole step (rollback waits on it); False when it stays busy.

    Transaction-scoped on a session of its own, so a killed worker's lock dies with it. A
    short wait lets a step outlast a dry-run rollback instead of dropping out of the chain."""
    async with sessions() as session, session.begin():
        await session.execute(text(f"SET LOCAL lock_timeout = '{RUN_LOCK_WAIT_MS}ms'"))
        try:
            await xact_lock(session, RUN_LOCK, run_id)
        except DBAPIError:  # lock_timeout: another step (or a rollback) holds the run
            yield False
            return
        yield True


async def nightly_step(services: Services, run_id: int, step: str) -> str | None:
    """Do ``step`` of run ``run_id`` if it is the pending one; enqueue and return the next."""
    with log_context(run_id=run_id, nightly_step=step):
        async with _run_lock(services.sessions, run_id) as held:
            if not held:
                logger.info("nightly step skipped: another worker holds the run")
                return None
            run = await _pending_run(services.sessions, run_id, step)
            if run is None:
                return None
            with spend_scope() as spend:
                try:
                    result = await _run_step(services, run, step)
                except Exception as exc:
                    logger.exception("nightly step crashed; the run is marked failed")
                    await _fail(services.sessions, run_id, f"{step}: {type(exc).__name__}", spend)
                    return None
            await _record(services.sessions, run_id, result, spend)
        if result.next is not None:
            await services.queue.enqueue(
                JOB_NAME, run_id, result.next, job_id=step_job_id(run_id, result.next)
            )
        return result.next


async def _pending_run(sessions: SessionFactory, run_id: int, step: str) -> RunView | None:
    async with sessions() as session:
        run = await session.get(NightlyRun, run_id)
    if run is None or run.status != "running" or run.rolled_back_at is not None:
        return None
    progress: dict[str, Any] = dict(run.summary.get("progress", {}))
    if progress.get("next") != step or run.window_start is None or run.window_end is None:
        return None  # a duplicate or stale job: that step is done (or not yet due)
    return RunView(run.id, run.window_start, run.window_end, progress)


async def _run_step(services: Services, run: RunView, step: str) -> StepResult:
    name, index = parse_step(step)
    if name == "plan":
        return await _plan(services, run)
    if name == "extract":
        return await _extract(services, run, index)
    if name == "retention":
        return await _retention(services, run)
    if name == "decay":
        return await _decay(services, run, index)
    if name == "diary":
        return await _diary(services, run)
    if name == "style":
        return await _style(services, run)
    if name == "finish":
        return StepResult(next=None)
    raise ValueError(f"unknown nightly step {step!r}")


async def _plan(services: Services, run: RunView) -> StepResult:
    if not services.settings.memory_active:
        # MEM-10: memory off means no extraction and no decay; diary and style still run.
        return StepResult(next="retention", progress={"chunks": [], "memory": "off"})
    async with services.sessions() as session:
        rows = await session.scalars(_newest_per_speaker(run))
        messages = [
            WindowMessage(m.id, m.author_id, m.author_name, m.content, m.created_at)
            for m in rows
            # A command (`!memory forget 3`) is not something the person said about themself.
            if parse_command(m.content, services.bot_user_id) is None
        ]
    chunks = [
        {"speaker": str(speaker), "index": index, "messages": [str(m.id) for m in chunk]}
        for speaker, speaker_chunks in sorted(plan_chunks(messages).items())
        for index, chunk in enumerate(speaker_chunks)
    ]
    return StepResult(
        next="extract:0" if chunks else "retention",
        progress={"chunks": chunks, "failed_speakers": []},
    )


def _newest_per_speaker(run: RunView) -> Select[tuple[Message]]:
    """The window's human messages, only each speaker's newest few: a busy day's older
    lines would be dropped by the chunk cap anyway (slack left for commands filtered out)."""
    rank = (
        func.row_number()
        .over(
            partition_by=Message.author_id,
            order_by=(Message.created_at.desc(), Message.id.desc()),
        )
        .label("rank")
    )
    ranked = (
        select(Message, rank)
        .where(
            Message.created_at >= run.window_start,
            Message.created_at < run.window_end,
            Message.is_bot.is_(False),
            Message.deleted_at.is_(None),
        )
        .subquery()
    )
    newest = aliased(Message, ranked)
    return select(newest).where(ranked.c.rank <= 2 * CHUNK_SIZE * CHUNKS_PER_SPEAKER)


def _after_extract(run: RunView, index: int) -> str:
    return f"extract:{index + 1}" if index + 1 < len(run.progress["chunks"]) else "retention"


async def _extract(services: Services, run: RunView, index: int) -> StepResult:
    chunk = run.progress["chunks"][index]
    speaker = int(chunk["speaker"])
    failed: list[str] = list(run.progress.get("failed_speakers", []))
    next_step = _after_extract(run, index)
    if chunk["speaker"] in failed:
        return StepResult(next=next_step)  # this speaker already failed tonight
    exchange = await _chunk_exchange(
        services.sessions, speaker, [int(i) for i in chunk["messages"]]
    )
    if exchange is None:
        return StepResult(next=next_step)
    trigger = f"nightly:{run.id}:{speaker}:{chunk['index']}"
    try:
        async with asyncio.timeout(STEP_BUDGET_S):
            await run_write_path(
                services, exchange, actor="nightly", run_id=run.id, trigger=trigger
            )
    except Exception as exc:
        # One speaker's failure is noted and the others continue.
        logger.warning(
            "nightly extraction failed for a speaker", exc_info=True, extra={"speaker_id": speaker}
        )
        return StepResult(
            next=next_step,
            errors=[f"extraction failed for speaker {speaker}: {type(exc).__name__}"],
            progress={"failed_speakers": [*failed, chunk["speaker"]]},
        )
    return StepResult(next=next_step)


async def _chunk_exchange(
    sessions: SessionFactory, speaker: int, message_ids: list[int]
) -> Exchange | None:
    """The chunk as it reads now: edits applied, messages deleted since left out."""
    async with sessions() as session:
        rows = list(
            await session.scalars(
                select(Message)
                .where(Message.id.in_(message_ids), Message.deleted_at.is_(None))
                .order_by(Message.created_at, Message.id)
            )
        )
    if not rows:
        return None
    lines = tuple(Line(m.author_id, m.author_name, m.is_bot, m.content) for m in rows)
    exchange = Exchange(speaker_id=speaker, speaker_name=rows[-1].author_name, lines=lines)
    return exchange if exchange.usable else None


async def _retention(services: Services, run: RunView) -> StepResult:
    """MEM-06: purge memories past MEMORY_RETENTION_DAYS before decay reviews any of them."""
    days = services.settings.memory_retention_days
    if days is not None:
        async with unit_of_work(services.sessions) as session:
            expired = await purge_expired(
                session, retention_days=days, run_id=run.id, now=run.window_end
            )
        ledger.count_changes(RETENTION_ACTOR, "delete", len(expired))
    return StepResult(next="decay:0")


async def _decay(services: Services, run: RunView, batch: int) -> StepResult:
    if not services.settings.memory_active:
        return StepResult(next="diary")
    cutoff = run.window_end - STALE_AFTER
    stale: list[int] | None = run.progress.get("stale")
    progress: dict[str, Any] = {}
    if stale is None:
        async with services.sessions() as session:
            stale = await stale_memory_ids(session, cutoff=cutoff, limit=STALE_CAP)
        progress["stale"] = stale
    ids = stale[batch * DECAY_BATCH : (batch + 1) * DECAY_BATCH]
    more = (batch + 1) * DECAY_BATCH < len(stale)
    result = StepResult(next=f"decay:{batch + 1}" if more else "diary", progress=progress)
    if not ids:
        return result
    try:
        async with asyncio.timeout(STEP_BUDGET_S):
            outcome = await review_stale(
                services, ids, run_id=run.id, cutoff=cutoff, now=run.window_end
            )
    except TimeoutError:
        # Deletes already committed stay logged; the rest are reviewed another night.
        result.errors.append(f"decay batch {batch} timed out")
        return result
    logger.info(
        "nightly decay batch",
        extra={"deleted": outcome.deleted, "kept": outcome.kept, "unanswered": outcome.unanswered},
    )
    return result


async def _diary(services: Services, run: RunView) -> StepResult:
    async with services.sessions() as session:
        lines = await last_messages(session, start=run.window_start, end=run.window_end)
    if not lines:
        return StepResult(next="style")
    try:
        async with asyncio.timeout(STEP_BUDGET_S):
            diary = await write_diary(services.chat, lines)
    except (ChatFailed, TimeoutError):
        return StepResult(next="style", errors=["diary: the chat model gave no diary"])
    return StepResult(next="style", diary=diary)


async def _style(services: Services, run: RunView) -> StepResult:
    async with services.sessions() as session:
        done = await session.scalar(select(StyleOverride.id).where(StyleOverride.run_id == run.id))
        signals = await window_signals(session, start=run.window_start, end=run.window_end)
        style = await current_style(session, services.settings.persona_path)
    if done is not None or not signals:
        return StepResult(next="finish")  # already revised, or no feedback: no revision
    try:
        async with asyncio.timeout(STEP_BUDGET_S):
            revised = await revise_style(services.chat, style, signals)
    except (ChatFailed, TimeoutError):
        return StepResult(next="finish", errors=["style: the chat model gave no revision"])
    async with unit_of_work(services.sessions) as session:
        session.add(StyleOverride(content=revised, run_id=run.id))
    return StepResult(next="finish")


# --- bookkeeping -------------------------------------------------------------------------


async def run_changes(session: AsyncSession, run_id: int) -> dict[str, list[int]]:
    """The run's changes as the ledger has them: the summary's id lists."""
    rows = await session.execute(
        select(MemoryLog.memory_id, MemoryLog.action, MemoryLog.reason)
        .where(
            MemoryLog.run_id == run_id,
            MemoryLog.actor.in_(("nightly", RETENTION_ACTOR)),
            MemoryLog.action.in_(("add", "update", "delete")),
            MemoryLog.memory_id.is_not(None),
        )
        .order_by(MemoryLog.id)
    )
    lists: dict[str, list[int]] = {name: [] for name in CHANGE_LISTS}
    for memory_id, action, reason in rows:
        if action == "delete" and reason == RETENTION_REASON:
            name = "expired"
        elif action == "delete":
            name = "decayed" if reason == DECAY_REASON else "deleted"
        else:
            name = "added" if action == "add" else "updated"
        if memory_id not in lists[name]:
            lists[name].append(memory_id)
    return lists


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
        run = await session.get(NightlyRun, run_id, with_for_update=True)
        assert run is not None
        summary = dict(run.summary)
        _add_spend(summary, spend)
        summary["errors"] = [*summary.get("errors", []), *result.errors]
        summary["progress"] = {
            **summary.get("progress", {}),
            **result.progress,
            "next": result.next,
            "beat": utcnow().isoformat(),
        }
        summary.update(await run_changes(session, run_id))
        run.summary = summary
        if result.diary is not None:
            run.diary = result.diary
        if result.next is None:
            run.status = "finished"
            run.finished_at = utcnow()
    if result.next is None:
        report_run("finished", summary)


async def _fail(sessions: SessionFactory, run_id: int, error: str, spend: Spend) -> None:
    """The run stops here; what it changed stays logged under its id, so it can be rolled back."""
    async with unit_of_work(sessions) as session:
        run = await session.get(NightlyRun, run_id, with_for_update=True)
        if run is None or run.status != "running":
            return
        summary = dict(run.summary)
        _add_spend(summary, spend)
        summary["errors"] = [*summary.get("errors", []), error]
        summary.update(await run_changes(session, run_id))
        run.summary = summary
        run.status = "failed"
        run.finished_at = utcnow()
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
    resumed: list[tuple[int, str]] = []
    async with unit_of_work(sessions) as session:
        runs = await session.scalars(
            select(NightlyRun)
            .where(NightlyRun.status == "running", NightlyRun.rolled_back_at.is_(None))
            .with_for_update(skip_locked=True)
        )
        for run in runs:
            progress = dict(run.summary.get("progress", {}))
            progressed = _moment(progress.get("beat")) or run.started_at
            touched = max(progressed, _moment(progress.get("resumed_at")) or progressed)
            if touched > now - STALL_AFTER or progress.get("next") is None:
                continue
            summary = dict(run.summary)
            if progressed < now - GIVE_UP_AFTER:
                summary["errors"] = [*summary.get("errors", []), "stalled: gave up resuming"]
                summary.update(await run_changes(session, run.id))
                run.status, run.finished_at = "failed", now
            else:
                resumes = int(progress.get("resumes", 0)) + 1
                progress.update(resumes=resumes, resumed_at=now.isoformat())
                summary["progress"] = progress
                resumed.append((run.id, str(progress["next"])))
            run.summary = summary
    for run_id, step in resumed:
        job_id = f"{step_job_id(run_id, step)}:resume{now.timestamp():.0f}"
        await queue.enqueue(JOB_NAME, run_id, step, job_id=job_id)
    return [run_id for run_id, _ in resumed]


def _moment(value: object) -> datetime | None:
    return datetime.fromisoformat(value) if isinstance(value, str) else None
