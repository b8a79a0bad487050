"""MEM-09 erasure (`!forgetme`, the admin erase) as a worker job: what the person wrote and
what was made from it, found by identity and recorded provenance, never by matching names or
words in other people's text (docs/operations.md).

The job works through fixed phases in bounded batches; each batch is one transaction that
also stores where the job is, so a killed worker resumes at the next batch and a retry never
starts over. From the moment the erasure is registered nothing new is written about the
person (``app.privacy.store``). At the end the receipt (counts only) goes to the ledger
and, for `!forgetme`, to the person by DM."""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import timedelta
from enum import StrEnum
from typing import Any

from pydantic import BaseModel, Field
from sqlalchemy.ext.asyncio import AsyncSession

from app.agent import store as agent_sessions
from app.channel import store as channel_log
from app.consent import store as consent
from app.db import SessionFactory, unit_of_work
from app.directory import store as directory
from app.discord.errors import DiscordError, DiscordUnavailable
from app.episodes import store as episodes
from app.frames.events import EventType
from app.inbound import store as inbox
from app.kit.clock import jst_day, utcnow
from app.kit.queue import Job, JobQueue
from app.memory import store
from app.memory.records import Why, turn_of
from app.nightly import store as runs
from app.observations import store as observations
from app.pins import store as pins
from app.privacy import identity, samples
from app.privacy import store as register
from app.privacy.store import ErasureRecord, RequestedBy, Status
from app.services import Services
from app.signals import store as signals
from app.turn import store as steps
from app.usage import store as usage
from app.vocabulary import Actor

log = logging.getLogger(__name__)

JOB_NAME = "erase_person"
ACTOR = Actor.FORGETME  # the ledger actor of every erasure, `!forgetme` or the admin's
RECEIPT_REASON = "erasure receipt"
JOB_BUDGET_S = 60.0  # then the job hands over to a fresh one (ARQ kills jobs at 100 s)
MAX_FAILURES = 8  # attempts in a row before the erasure shows as failed
RETRY_FAILED_AFTER = timedelta(minutes=15)  # then the sweeper runs a failed erasure again
HOUR = timedelta(hours=1)  # TASKS_PER_USER_PER_HOUR's window
MAX_NOTICE_ATTEMPTS = 5
STARTED = (
    "I'm erasing what I have from you now. I'll send you a receipt by DM when it's done, "
    "and I won't learn anything new about you from now on."
)
DONE_NO_DM = (
    "I finished erasing what I had from you, but I couldn't send the receipt by DM. "
    "`!memory resume` turns learning back on if you change your mind."
)


class Phase(StrEnum):
    PREPARE = "prepare"
    REPLY_READS = "reply-reads"
    MEMORIES = "memories"
    LEDGER = "ledger"
    MESSAGES = "messages"
    DMS = "dms"
    FRAMES = "frames"
    OBSERVATIONS = "observations"
    SIGNALS = "signals"
    ARTIFACTS = "artifacts"
    MENTIONS = "mentions"
    STATISTICS = "statistics"
    NOTIFY = "notify"


ORDER = list(Phase)
RECEIPT_KEYS = (
    "memories",
    "ledger_rows_redacted",
    "ledger_read_counts",
    "messages",
    "dm_messages",
    "replies_blanked",
    "frames_redacted",
    "events_closed",
    "step_records",
    "observations",
    "signals",
    "episodes",
    "diaries_blanked",
    "style_revisions",
    "task_turns",
    "nightly_summaries",
    "pins",
    "channel_personas",
    "thread_names",
    "tombstones",
    "mentions_replaced",
    "usage_rows",
    "tokens_kept",  # today's tokens, a number the daily budget still counts
    "tasks_kept",  # the last hour's tasks, which the hourly task quota still counts
)


class Progress(BaseModel):
    """Where the job is, stored with every batch. ``names``, ``channels`` and the legacy
    lists hold what the later phases need after the rows they came from are gone; the names
    go as soon as the artifacts phase has used them, the rest with the progress when the
    erasure is done."""

    phase: Phase = Phase.PREPARE
    cursor: int = 0
    frame_cursor: str = ""
    analysed: str = ""  # the statistics phase: the last table analysed
    counts: dict[str, int] = Field(default_factory=lambda: dict.fromkeys(RECEIPT_KEYS, 0))
    names: list[str] = Field(default_factory=list)
    channels: list[int] = Field(default_factory=list)
    dm_channels: list[int] = Field(default_factory=list)
    legacy_diaries: list[int] = Field(default_factory=list)
    legacy_styles: list[int] = Field(default_factory=list)
    jobs: int = 0
    failures: int = 0
    notice_attempts: int = 0

    def add(self, key: str, n: int) -> None:
        self.counts[key] = self.counts.get(key, 0) + n

    def advance(self) -> None:
        self.phase = ORDER[ORDER.index(self.phase) + 1]
        self.cursor, self.frame_cursor = 0, ""


@dataclass(frozen=True, slots=True)
class Who:
    erasure: ErasureRecord
    bot_user_id: int
    batch: int

    @property
    def user_id(self) -> int:
        return self.erasure.user_id


# --- starting -------------------------------------------------------------------------------


def job_id(erasure_id: int, jobs: int) -> str:
    return f"erasure:{erasure_id}:{jobs}"


async def start_erasure(
    sessions: SessionFactory,
    queue: JobQueue,
    user_id: int,
    *,
    requested_by: RequestedBy,
    command_event_id: str | None = None,
    channel_id: int | None = None,
) -> ErasureRecord:
    """Register the erasure (or join the one running) and hand it to the workers. Once this
    returns, nothing new is written about the person; the sweeper re-enqueues a job that
    could not be enqueued here."""
    async with unit_of_work(sessions) as session:
        erasure, _ = await register.start(
            session,
            user_id,
            requested_by=requested_by,
            command_event_id=command_event_id,
            channel_id=channel_id,
        )
    if erasure.status is Status.RUNNING:
        await _enqueue(queue, erasure)
    return erasure


async def _enqueue(queue: JobQueue, erasure: ErasureRecord, *, defer_s: float = 0) -> None:
    jobs = Progress.model_validate(erasure.progress).jobs
    try:
        await ERASE.send(queue, job_id(erasure.id, jobs), defer_s=defer_s)(erasure.id)
    except Exception as exc:
        log.warning("erasure job not enqueued", extra={"error": type(exc).__name__})


async def resume_erasures(services: Services) -> int:
    """Every running erasure has a job (the sweeper's minute): the job id dedupes one that
    is already queued, and a job finding another at work leaves at once. A failed one runs
    again once RETRY_FAILED_AFTER has passed since its last attempt, and again after that:
    an erasure is never left half done."""
    async with unit_of_work(services.sessions) as session:
        revived = await register.revive_failed(session, failed_before=utcnow() - RETRY_FAILED_AFTER)
    if revived:
        log.warning("failed erasures run again", extra={"erasure_ids": revived})
    async with services.sessions() as session:
        ids = await register.running_ids(session)
        running = [e for i in ids if (e := await register.get(session, i)) is not None]
    for erasure in running:
        await _enqueue(services.queue, erasure)
    return len(running)


async def forget_spent(sessions: SessionFactory) -> int:
    """The figures erasures keep for the budgets, once they no longer count (the daily
    prune): how many erasures changed."""
    now = utcnow()
    async with unit_of_work(sessions) as session:
        return await register.drop_spent(session, today=jst_day(now), hour_ago=now - HOUR)


# --- the job --------------------------------------------------------------------------------


async def run_erasure(services: Services, erasure_id: int) -> ErasureRecord | None:
    """The job body: batches until the erasure is done or the job's budget is spent, then a
    fresh job takes over. None when another job holds this erasure."""
    async with services.sessions() as holder, holder.begin():
        if not await register.claim_job(holder, erasure_id):
            log.info("erasure job skipped: another job works on it")
            return None
        try:
            return await _run(services, erasure_id, time.monotonic() + JOB_BUDGET_S)
        except Exception as exc:
            await _note_failure(services, erasure_id, type(exc).__name__)
            raise


ERASE = Job(JOB_NAME, run_erasure)


async def _run(services: Services, erasure_id: int, deadline: float) -> ErasureRecord | None:
    batch = services.settings.erasure_batch_size
    while True:
        async with unit_of_work(services.sessions) as session:
            erasure = await register.get(session, erasure_id)
            if erasure is None or erasure.status is not Status.RUNNING:
                return erasure
            progress = Progress.model_validate(erasure.progress)
            if progress.phase is Phase.NOTIFY:
                break
            who = Who(erasure, services.bot_user_id, batch)
            phase = progress.phase
            waiting = await PHASES[phase](session, who, progress)
            if waiting or time.monotonic() > deadline:
                progress.jobs += 1
            await register.save_progress(session, erasure_id, progress.model_dump(mode="json"))
        if progress.phase is not phase:
            log.info("erasure phase done", extra={"erasure_id": erasure_id, "phase": phase.value})
            if phase is Phase.ARTIFACTS and progress.counts.get("channel_personas"):
                await services.channel_rules.invalidate()  # their persona left every cache
        if waiting or time.monotonic() > deadline:
            erasure = await _get(services, erasure_id)
            await _enqueue(services.queue, erasure, defer_s=15 if waiting else 0)
            return erasure
    return await _finish(services, erasure, progress)


async def _get(services: Services, erasure_id: int) -> ErasureRecord:
    async with services.sessions() as session:
        erasure = await register.get(session, erasure_id)
    assert erasure is not None
    return erasure


async def _note_failure(services: Services, erasure_id: int, error: str) -> None:
    try:
        async with unit_of_work(services.sessions) as session:
            erasure = await register.get(session, erasure_id)
            if erasure is None:
                return
            progress = Progress.model_validate(erasure.progress)
            progress.failures += 1
            await register.save_progress(session, erasure_id, progress.model_dump(mode="json"))
            final = progress.failures >= MAX_FAILURES
            await register.note_failure(session, erasure_id, error, final=final)
    except Exception:
        log.warning("erasure failure not recorded", exc_info=True)


async def _finish(services: Services, erasure: ErasureRecord, progress: Progress) -> ErasureRecord:
    """The person hears it is done (the DM, else a notice where they asked), then the
    receipt goes to the ledger and the register."""
    if erasure.requested_by is RequestedBy.FORGETME:
        try:
            await _notify(services, erasure, progress.counts)
        except DiscordUnavailable:
            if progress.notice_attempts + 1 < MAX_NOTICE_ATTEMPTS:
                async with unit_of_work(services.sessions) as session:
                    progress.notice_attempts += 1
                    progress.jobs += 1
                    await register.save_progress(
                        session, erasure.id, progress.model_dump(mode="json")
                    )
                raise
            log.warning("erasure receipt not delivered: Discord stayed unavailable")
    async with unit_of_work(services.sessions) as session:
        receipt = {key: progress.counts.get(key, 0) for key in RECEIPT_KEYS}
        await store.record_erasure(session, erasure.user_id, Why(ACTOR, RECEIPT_REASON), receipt)
        await register.finish(session, erasure.id, receipt)
    log.info("erasure done", extra={"erasure_id": erasure.id, **progress.counts})
    return await _get(services, erasure.id)


async def _notify(services: Services, erasure: ErasureRecord, counts: dict[str, int]) -> None:
    try:
        await services.discord.send_dm(
            erasure.user_id, format_receipt(counts), nonce_key=f"erasure:{erasure.id}"
        )
    except DiscordUnavailable:
        raise
    except DiscordError as exc:
        log.info("erasure receipt: DM failed", extra={"error": type(exc).__name__})
        if erasure.channel_id is not None:
            await services.discord.send_message(
                erasure.channel_id, DONE_NO_DM, nonce_key=f"erasure-notice:{erasure.id}"
            )


def format_receipt(counts: dict[str, int]) -> str:
    """Pure: the receipt the person gets. Counts only, so it reveals nothing erased."""

    def n(key: str, one: str, many: str) -> str:
        count = counts.get(key, 0)
        return f"{count} {one if count == 1 else many}"

    return (
        "Done: I erased what I had from you — "
        f"{n('memories', 'memory', 'memories')}, "
        f"{n('messages', 'message', 'messages')} (and {n('dm_messages', 'message', 'messages')} "
        "of our DMs), "
        f"{n('observations', 'observation', 'observations')}, "
        f"{n('signals', 'reaction/correction', 'reactions/corrections')}, "
        f"{n('episodes', 'channel summary', 'channel summaries')} and "
        f"{n('replies_blanked', 'reply of mine', 'replies of mine')} built from what you said. "
        "My memory log keeps only that this erasure happened, not what was erased. "
        "So that my daily limits stay fair, I kept two numbers, no words: the tokens you used "
        f"today ({counts.get('tokens_kept', 0):,}) until midnight Japan time, and "
        f"{n('tasks_kept', 'task', 'tasks')} you asked for in the last hour, for that hour. "
        "I won't learn anything new about you from now on; `!memory resume` turns learning "
        "back on if you change your mind."
    )


# --- the phases: each does one bounded batch in the caller's transaction ---------------------
# A phase returns True to pause the job a little (something it needs is busy).

PhaseStep = Callable[[AsyncSession, Who, Progress], Awaitable[bool]]


async def _prepare(session: AsyncSession, who: Who, progress: Progress) -> bool:
    """What later phases need before the rows it comes from go: the distinctive names that
    are theirs alone, where they spoke, the legacy artifacts of their days; learning paused
    and their unfinished events closed."""
    user_id = who.user_id
    names = set(await channel_log.names_of(session, user_id))
    usernames = await inbox.usernames_in_frames(session, user_id)
    taken = await channel_log.names_others_used(session, user_id, names)
    unique = {name for name in usernames if identity.distinctive(name)}  # Discord's: unique
    progress.names = sorted(set(identity.names_theirs_alone(names, taken)) | unique)
    progress.channels, progress.dm_channels = await channel_log.channels_of(session, user_id)
    diaries = await runs.legacy_diary_windows(session)
    spoke = await channel_log.spoke_in_windows(session, user_id, [(s, e) for _, s, e in diaries])
    progress.legacy_diaries = [diaries[i][0] for i in sorted(spoke)]
    styles = await runs.legacy_style_windows(session)
    windows = [(s, e) for _, s, e in styles]
    rated = await signals.given_in_windows(session, user_id, windows)
    rated |= await channel_log.spoke_in_windows(session, user_id, windows)
    progress.legacy_styles = [styles[i][0] for i in sorted(rated)]
    await consent.pause(session, user_id)  # they asked to be forgotten
    # The step records that hold their task grants go with their messages: the hour's
    # quota keeps counting them here, as times only.
    grants = await steps.task_grants_within_the_hour(session, user_id)
    await register.keep_task_grants(session, user_id, grants)
    progress.add("tasks_kept", len(grants))
    closed = await inbox.close_unfinished_of(
        session, user_id, before=who.erasure.started_at, keep=who.erasure.command_event_id
    )
    progress.add("events_closed", closed)
    progress.advance()
    return False


async def _reply_reads(session: AsyncSession, who: Who, progress: Progress) -> bool:
    """The bot's replies whose prompt held their memories (the reply reads say which turn
    read which memory), blanked with their frames, observations and fixed texts."""
    reads = await store.reply_reads(session, who.user_id, after_id=progress.cursor, limit=who.batch)
    if not reads:
        progress.advance()
        return False
    events = [e for _, trigger in reads if (e := turn_of(trigger)) is not None]
    triggers = [int(e) for e in events if e.isdigit()]
    replies = await channel_log.bot_replies_to(session, triggers, who.bot_user_id)
    progress.add("replies_blanked", await _blank_bot_messages(session, replies))
    await steps.blank_texts(session, events)
    progress.cursor = reads[-1][0]
    return False


async def _blank_bot_messages(session: AsyncSession, message_ids: list[int]) -> int:
    await observations.delete_of_messages(session, message_ids)
    frames = await inbox.frames_about(session, message_ids)
    await inbox.rewrite_frames(session, frames, identity.stub_frame)
    return await channel_log.blank(session, message_ids)


async def _memories(session: AsyncSession, who: Who, progress: Progress) -> bool:
    why = Why(ACTOR, f"erasure {who.erasure.id}")
    gone, redacted = await store.erase_batch(session, who.user_id, why, limit=who.batch)
    progress.add("memories", gone)
    progress.add("ledger_rows_redacted", redacted)
    if gone < who.batch:
        progress.advance()
    return False


async def _ledger(session: AsyncSession, who: Who, progress: Progress) -> bool:
    last, redacted = await store.redact_ledger_batch(
        session, who.user_id, after_id=progress.cursor, limit=who.batch
    )
    progress.add("ledger_rows_redacted", redacted)
    if last is None:
        progress.add("ledger_read_counts", await store.forget_read_counts(session, who.user_id))
        progress.advance()
    else:
        progress.cursor = last
    return False


async def _messages(session: AsyncSession, who: Who, progress: Progress) -> bool:
    """A batch of their messages: the bot's replies to them blanked, other people's replies
    keep only the ids of what they quoted, their frames, step records and early edits go,
    then the messages."""
    ids = await channel_log.author_batch(
        session, who.user_id, after_id=progress.cursor, limit=who.batch
    )
    if not ids:
        progress.advance()
        return False
    replies = await channel_log.replies_to(session, ids)
    bots = [m.id for m in replies if m.author_id == who.bot_user_id]
    others = [m.id for m in replies if m.author_id not in (who.bot_user_id, who.user_id)]
    progress.add("replies_blanked", await _blank_bot_messages(session, bots))
    quoting = await inbox.frames_about(session, others)
    await inbox.rewrite_frames(
        session, quoting, lambda f: identity.without_reference_to(f, who.user_id)
    )
    progress.add("frames_redacted", await _stub_message_frames(session, ids))
    progress.add("step_records", await steps.forget_events(session, [str(i) for i in ids]))
    progress.add("tombstones", await channel_log.delete_tombstones(session, message_ids=ids))
    progress.add("messages", await channel_log.delete_ids(session, ids))
    progress.cursor = ids[-1]
    return False


_MESSAGE_FRAMES = {EventType.MESSAGE_CREATE.value, EventType.MESSAGE_UPDATE.value}


async def _stub_message_frames(session: AsyncSession, message_ids: list[int]) -> int:
    """The creates and edits of these messages (whoever's frame carries their text)."""

    def stub(frame: Any) -> Any:
        return identity.stub_frame(frame) if frame.get("t") in _MESSAGE_FRAMES else frame

    return await inbox.rewrite_frames(session, await inbox.frames_about(session, message_ids), stub)


async def _dms(session: AsyncSession, who: Who, progress: Progress) -> bool:
    """Their DMs with the bot, both sides: the bot's messages there, then every frame and
    observation of those channels."""
    ids = await channel_log.channel_batch(session, progress.dm_channels, limit=who.batch)
    if ids:
        await observations.delete_of_messages(session, ids)
        await steps.forget_events(session, [str(i) for i in ids])
        progress.add("frames_redacted", await _stub_message_frames(session, ids))
        progress.add("dm_messages", await channel_log.delete_ids(session, ids))
        return False
    frames = await inbox.frames_about(session, [], channel_ids=progress.dm_channels)
    progress.add(
        "frames_redacted", await inbox.rewrite_frames(session, frames, identity.stub_frame)
    )
    await observations.delete_in_channels(session, progress.dm_channels)
    progress.advance()
    return False


async def _frames(session: AsyncSession, who: Who, progress: Progress) -> bool:
    """Every frame of theirs (messages, edits, reactions), down to a stub of ids."""
    ids = await inbox.frames_by_author(
        session, who.user_id, after_id=progress.frame_cursor, limit=who.batch
    )
    if not ids:
        progress.advance()
        return False
    progress.add("frames_redacted", await inbox.rewrite_frames(session, ids, identity.stub_frame))
    progress.frame_cursor = ids[-1]
    return False


async def _observations(session: AsyncSession, who: Who, progress: Progress) -> bool:
    gone = await observations.delete_by_user(
        session, who.user_id, after_id=progress.cursor, limit=who.batch
    )
    return _deleted(progress, "observations", gone)


async def _signals(session: AsyncSession, who: Who, progress: Progress) -> bool:
    gone = await signals.delete_by_user(
        session, who.user_id, after_id=progress.cursor, limit=who.batch
    )
    return _deleted(progress, "signals", gone)


def _deleted(progress: Progress, key: str, gone: list[int]) -> bool:
    """A delete-in-batches phase moves its cursor on, and is done when nothing was left."""
    progress.add(key, len(gone))
    if gone:
        progress.cursor = gone[-1]
    else:
        progress.advance()
    return False


async def _artifacts(session: AsyncSession, who: Who, progress: Progress) -> bool:
    """What was made from their words, judged by its recorded inputs alone; what was made
    before inputs were recorded, by MEM-09's rule confined to the person (an episode of a
    channel they spoke in, a diary of a night they spoke in, that names them by a distinctive
    name theirs alone) or, for task turns and style revisions, by where and when they spoke.
    Each of these tables is bounded (episodes per channel, one diary and style a night, one
    task session per channel), so one transaction does it."""
    user_id, names = who.user_id, progress.names
    spoke = [*progress.channels, *progress.dm_channels]
    summaries, busy = await runs.rewrite_summaries(
        session, user_id, lambda s: identity.summary_without(s, user_id)
    )
    if busy:  # tonight's run names them: its steps own the summary until it ends
        return True

    def named(text: str) -> bool:
        return bool(names) and identity.names_any(text, names)

    progress.add(
        "episodes",
        await episodes.delete_made_from(session, user_id)
        + await episodes.delete_legacy_where(session, spoke, named),
    )
    progress.add(
        "diaries_blanked",
        await runs.blank_diaries_from(session, user_id)
        + await runs.blank_diaries_where(session, progress.legacy_diaries, named),
    )
    progress.add(
        "style_revisions",
        await runs.delete_styles_from(session, user_id)
        + await runs.delete_styles(session, progress.legacy_styles),
    )
    progress.add("task_turns", await agent_sessions.forget_person(session, user_id, spoke))
    progress.add("nightly_summaries", summaries)
    progress.add("pins", await pins.delete_by_creator(session, user_id))
    progress.add("channel_personas", await directory.forget_setter(session, user_id))
    progress.add("thread_names", await directory.forget_names(session, user_id))
    progress.add("tombstones", await channel_log.delete_tombstones(session, author_id=user_id))
    progress.names = []  # nothing after this phase needs them: a later failure keeps none
    # Their model usage stays in the totals, as nobody's; today's tokens stay theirs as a
    # number, so the daily budget still counts them.
    today = jst_day(utcnow())
    spent = await usage.person_tokens(session, today, user_id)
    await register.keep_tokens(session, user_id, today, spent)
    progress.add("tokens_kept", spent)
    progress.add("usage_rows", await usage.forget_person(session, user_id))
    progress.advance()
    return False


async def _mentions(session: AsyncSession, who: Who, progress: Progress) -> bool:
    """Mentions of their id in other people's texts become a neutral token: in messages
    (found by the mentions index), their frames and observations, and the memories learned
    from them; then in the summaries, pins, diaries, styles and task sessions."""
    user_id, token = who.user_id, identity.MENTION_TOKEN
    ids = await channel_log.mentioning_batch(
        session, user_id, after_id=progress.cursor, limit=who.batch
    )
    if ids:
        replaced = await channel_log.replace_mentions(session, ids, user_id, token)
        frames = await inbox.frames_about(session, ids)
        await inbox.rewrite_frames(
            session, frames, lambda f: identity.without_mentions_of(f, user_id)
        )
        await observations.replace_mentions(session, ids, user_id, token)
        why = Why(ACTOR, f"erasure {who.erasure.id}: a mention of an erased person")
        learned = await store.learned_from(session, ids)
        replaced += await store.replace_mentions(session, learned, user_id, token, why)
        progress.add("mentions_replaced", replaced)
        progress.cursor = ids[-1]
        return False
    progress.add(
        "mentions_replaced",
        await episodes.replace_mentions(session, user_id, token)
        + await pins.replace_mentions(session, user_id, token)
        + await runs.replace_mentions(session, user_id, token)
        + await agent_sessions.replace_mentions(session, user_id, token),
    )
    # An edit, delete or reaction clear of one of their messages that ran during the
    # erasure filed an observation under them (their messages still existed then).
    late = await observations.delete_by_user(session, user_id, after_id=0, limit=who.batch)
    progress.add("observations", len(late))
    progress.advance()
    return False


async def _statistics(session: AsyncSession, who: Who, progress: Progress) -> bool:
    """The planner's samples (``app.privacy.samples``): every table analysed afresh, a slice
    a batch, so none of the samples is of their rows any more."""
    done = await samples.refresh_some(session, after=progress.analysed)
    if done is None:
        progress.advance()
    else:
        progress.analysed = done
    return False


PHASES: dict[Phase, PhaseStep] = {
    Phase.PREPARE: _prepare,
    Phase.REPLY_READS: _reply_reads,
    Phase.MEMORIES: _memories,
    Phase.LEDGER: _ledger,
    Phase.MESSAGES: _messages,
    Phase.DMS: _dms,
    Phase.FRAMES: _frames,
    Phase.OBSERVATIONS: _observations,
    Phase.SIGNALS: _signals,
    Phase.ARTIFACTS: _artifacts,
    Phase.MENTIONS: _mentions,
    Phase.STATISTICS: _statistics,
}
