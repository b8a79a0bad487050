"""The nightly run's steps, in seed 000's order: extraction over each speaker's chunks of six
(newest five chunks), retention (MEM-06), the decay review (twenty a night), the diary, the
style revision (one guild a step). Each step is bounded by caps and does its piece in one ARQ job.

Extraction runs in waves: each ``extract:<n>`` step works on up to NIGHTLY_CONCURRENCY
speakers at once, one chunk each; a speaker's chunks stay in order, one per wave."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from app.channel import store as channel_log
from app.channel.exchange import EXCHANGE_SIZE, Exchange, Place, build_exchange, in_sixes
from app.channel.store import LoggedMessage, line_of
from app.chat.base import ChatFailed
from app.commands.parser import parse_command
from app.consent import store as consent
from app.consent.service import may_learn_about
from app.db import unit_of_work
from app.kit.clock import utcnow
from app.memory import store as memories
from app.memory.decay import STALE_AFTER, STALE_CAP, review_stale
from app.memory.write_path import run_write_path
from app.nightly import store as runs
from app.nightly.diary import DIARY_MESSAGES, DiaryLine, write_diary
from app.nightly.progress import Chunk, Progress
from app.nightly.style import (
    SIGNAL_CAP,
    SIGNALS_PER_PERSON,
    STYLE_GUILDS,
    current_style,
    rejection,
    revise_style,
)
from app.privacy import store as register
from app.services import Services
from app.signals import store as signals
from app.structured.retention import purge_expired
from app.usage.budget import background_over_budget
from app.vocabulary import Actor, NightlyStep, StepName

logger = logging.getLogger(__name__)

CHUNKS_PER_SPEAKER = 5
DECAY_BATCH = 5
# Jobs are killed at 100 s. A slow model (timeouts × SDK retries) must end as a noted
# failure of that piece, not as a killed job, so each model-calling piece gets this budget.
STEP_BUDGET_S = 75.0


@dataclass(frozen=True, slots=True)
class RunView:
    id: int
    window_start: datetime
    window_end: datetime
    progress: Progress


@dataclass
class StepResult:
    """``progress`` is the run's progress after the step (None: unchanged but for ``next``)."""

    next: NightlyStep | None
    errors: list[str] = field(default_factory=list)
    progress: Progress | None = None
    diary: str | None = None
    # Provenance of the diary: the authors it was written from, and when they were read.
    diary_sources: list[int] = field(default_factory=list)
    read_at: datetime | None = None


RETENTION = NightlyStep(StepName.RETENTION)
DIARY = NightlyStep(StepName.DIARY)
STYLE = NightlyStep(StepName.STYLE)
FINISH = NightlyStep(StepName.FINISH)


async def run_step(services: Services, run: RunView, step: NightlyStep) -> StepResult:
    match step.name:
        case StepName.PLAN:
            return await plan(services, run)
        case StepName.EXTRACT:
            return await extract(services, run, step)
        case StepName.RETENTION:
            return await retention(services, run)
        case StepName.DECAY:
            return await decay(services, run, step)
        case StepName.DIARY:
            return await diary(services, run)
        case StepName.STYLE:
            return await style(services, run, step)
        case StepName.FINISH:
            return StepResult(next=None)


# --- extraction --------------------------------------------------------------------------


def plan_chunks(messages: Iterable[LoggedMessage]) -> dict[int, list[list[LoggedMessage]]]:
    """Pure: human messages by speaker, in sixes cut from the newest end, the newest five
    chunks kept, oldest first (a later chunk can update what an earlier one added).

    A chunk never mixes places: each speaker's messages are cut in sixes per guild (or DM),
    then the speaker's newest five chunks of all are kept."""
    by_place: dict[tuple[int, int | None], list[LoggedMessage]] = {}
    for message in sorted(messages, key=lambda m: (m.created_at, m.id)):
        if message.is_bot or message.deleted or not message.content.strip():
            continue
        by_place.setdefault((message.author_id, message.guild_id), []).append(message)
    by_speaker: dict[int, list[list[LoggedMessage]]] = {}
    for (speaker, _), said in by_place.items():
        by_speaker.setdefault(speaker, []).extend(in_sixes(said, keep=CHUNKS_PER_SPEAKER))
    return {
        speaker: sorted(chunks, key=lambda c: (c[-1].created_at, c[-1].id))[-CHUNKS_PER_SPEAKER:]
        for speaker, chunks in by_speaker.items()
    }


def plan_waves(chunks: Sequence[Chunk], concurrency: int) -> list[list[int]]:
    """Pure: the chunks' indices in waves of at most ``concurrency``, one chunk per speaker per
    wave, each speaker's chunks in their order. Speakers are dealt, busiest first, to the
    least loaded of ``concurrency`` lanes, each lane doing its speakers one after another;
    wave n is every lane's n-th chunk, so the waves are about as few as the cap allows."""
    by_speaker: dict[str, list[int]] = {}
    for index, chunk in enumerate(chunks):
        by_speaker.setdefault(chunk.speaker, []).append(index)
    lanes: list[list[int]] = [[] for _ in range(max(1, concurrency))]
    for _, indices in sorted(by_speaker.items(), key=lambda item: (-len(item[1]), item[0])):
        min(lanes, key=len).extend(indices)
    depth = max(len(lane) for lane in lanes)
    return [[lane[n] for lane in lanes if n < len(lane)] for n in range(depth)]


async def plan(services: Services, run: RunView) -> StepResult:
    if not services.settings.memory_active:
        # MEM-10: memory off means no extraction and no decay; diary and style still run.
        progress = run.progress.model_copy(update={"chunks": [], "memory_off": True})
        return StepResult(next=RETENTION, progress=progress)
    async with services.sessions() as session:
        # Only each speaker's newest few: a busy day's older lines would be dropped by the
        # chunk cap anyway (slack left for commands filtered out below).
        rows = await channel_log.newest_human_messages(
            session,
            start=run.window_start,
            end=run.window_end,
            per_author=2 * EXCHANGE_SIZE * CHUNKS_PER_SPEAKER,
        )
        learnable = await may_learn_about(
            session,
            {m.author_id for m in rows},
            services.settings,
            bot_user_id=services.bot_user_id,
            now=run.window_end,
        )
    # A command (`!memory forget 3`) is not something the person said about themself, and
    # nothing is learned about a person who paused learning (or is out of the learning scope).
    said = [
        m
        for m in rows
        if m.author_id in learnable and parse_command(m.content, services.bot_user_id) is None
    ]
    chunks = [
        Chunk(speaker=str(speaker), index=index, messages=[str(m.id) for m in chunk])
        for speaker, speaker_chunks in sorted(plan_chunks(said).items())
        for index, chunk in enumerate(speaker_chunks)
    ]
    # The waves are fixed with the plan: a worker with another setting resumes the same ones.
    waves = plan_waves(chunks, services.settings.nightly_concurrency)
    planned = {"chunks": chunks, "waves": waves, "failed_speakers": []}
    return StepResult(
        next=NightlyStep(StepName.EXTRACT) if chunks else RETENTION,
        progress=run.progress.model_copy(update=planned),
    )


async def extract(services: Services, run: RunView, step: NightlyStep) -> StepResult:
    """Wave ``index``: its chunks at once, each within its own budget (so the job stays well
    under ARQ's timeout however many run). A speaker whose chunk fails gets no more tonight."""
    chunks = run.progress.chunks
    # A run planned before waves existed did one chunk a step.
    waves = run.progress.waves or [[i] for i in range(len(chunks))]
    failed = list(run.progress.failed_speakers)
    result = StepResult(next=step.next_batch() if step.index + 1 < len(waves) else RETENTION)
    wave = [chunks[i] for i in waves[step.index] if chunks[i].speaker not in failed]
    outcomes = await asyncio.gather(
        *(_extract_chunk(services, run, chunk) for chunk in wave), return_exceptions=True
    )
    for outcome in outcomes:  # anything but the write path failing fails the step, as before
        if isinstance(outcome, BaseException):
            raise outcome
    for chunk, error in zip(wave, outcomes, strict=True):
        if error is not None:
            result.errors.append(str(error))
            failed.append(chunk.speaker)
    if result.errors:
        result.progress = run.progress.model_copy(update={"failed_speakers": failed})
    return result


async def _extract_chunk(services: Services, run: RunView, chunk: Chunk) -> str | None:
    """One chunk through the write path; the error to note when it failed."""
    speaker = int(chunk.speaker)
    exchange = await _chunk_exchange(services, speaker, [int(i) for i in chunk.messages])
    if exchange is None:
        return None
    trigger = f"nightly:{run.id}:{speaker}:{chunk.index}"
    try:
        async with asyncio.timeout(STEP_BUDGET_S):
            await run_write_path(
                services, exchange, actor=Actor.NIGHTLY, run_id=run.id, trigger=trigger
            )
    except Exception as exc:
        # One speaker's failure is noted and the others continue.
        logger.warning(
            "nightly extraction failed for a speaker", exc_info=True, extra={"speaker_id": speaker}
        )
        return f"extraction failed for speaker {speaker}: {type(exc).__name__}"
    return None


async def _chunk_exchange(
    services: Services, speaker: int, message_ids: list[int]
) -> Exchange | None:
    """The chunk as it reads now: edits applied, messages deleted since left out. A chunk's
    messages were all said in one place (``plan_chunks``)."""
    async with services.sessions() as session:
        rows = await channel_log.live_messages(session, message_ids)
    if not rows:
        return None
    place = Place(rows[-1].guild_id)
    exchange = build_exchange([line_of(m) for m in rows], speaker_id=speaker, place=place)
    return exchange if exchange.usable else None


# --- retention and decay -----------------------------------------------------------------


async def retention(services: Services, run: RunView) -> StepResult:
    """MEM-06: purge memories past MEMORY_RETENTION_DAYS before decay reviews any of them."""
    days = services.settings.memory_retention_days
    if days is not None:
        async with unit_of_work(services.sessions) as session:
            await purge_expired(session, retention_days=days, run_id=run.id, now=run.window_end)
    return StepResult(next=NightlyStep(StepName.DECAY))


async def decay(services: Services, run: RunView, step: NightlyStep) -> StepResult:
    if not services.settings.memory_active:
        return StepResult(next=DIARY)
    cutoff = run.window_end - STALE_AFTER
    stale = run.progress.stale
    progress: Progress | None = None
    if stale is None:
        async with services.sessions() as session:
            stale = await memories.stale_ids(session, cutoff=cutoff, limit=STALE_CAP)
        progress = run.progress.model_copy(update={"stale": stale})
    batch = step.index
    ids = stale[batch * DECAY_BATCH : (batch + 1) * DECAY_BATCH]
    more = (batch + 1) * DECAY_BATCH < len(stale)
    result = StepResult(next=step.next_batch() if more else DIARY, progress=progress)
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


# --- diary and style ---------------------------------------------------------------------


async def diary(services: Services, run: RunView) -> StepResult:
    read_at = utcnow()
    async with services.sessions() as session:
        rows = await channel_log.last_messages(
            session, start=run.window_start, end=run.window_end, limit=DIARY_MESSAGES
        )
    if not rows:
        return StepResult(next=STYLE)
    lines = [DiaryLine(m.author_id, m.author_name, m.is_bot, m.content) for m in rows]
    try:
        async with asyncio.timeout(STEP_BUDGET_S):
            text = await write_diary(services.chat, lines)
    except (ChatFailed, TimeoutError):
        return StepResult(next=STYLE, errors=["diary: the chat model gave no diary"])
    authors = sorted({m.author_id for m in rows if not m.is_bot})
    return StepResult(next=STYLE, diary=text, diary_sources=authors, read_at=read_at)


async def style(services: Services, run: RunView, step: NightlyStep) -> StepResult:
    """Step ``style:<n>`` revises the n-th guild's style. The guilds (those with feedback
    tonight, at most STYLE_GUILDS, the most first) are fixed by the first style step, so a
    resumed run revises the same ones; a DM's feedback revises nothing."""
    guilds = run.progress.style_guilds
    progress: Progress | None = None
    if guilds is None:
        async with services.sessions() as session:
            found = await signals.feedback_guilds(
                session,
                start=run.window_start,
                end=run.window_end,
                per_person=SIGNALS_PER_PERSON,
                limit=STYLE_GUILDS,
            )
        guilds = [str(guild) for guild in found]
        progress = run.progress.model_copy(update={"style_guilds": guilds})
    more = step.index + 1 < len(guilds)
    result = StepResult(next=step.next_batch() if more else FINISH, progress=progress)
    if step.index < len(guilds):
        result.errors.extend(await _guild_style(services, run, int(guilds[step.index])))
    return result


async def _guild_style(services: Services, run: RunView, guild_id: int) -> list[str]:
    """Revise one guild's style from its own feedback; the errors to note."""
    read_at = utcnow()
    async with services.sessions() as session:
        done = await runs.style_of_runs(session, [run.id])
        if any(made.guild_id == guild_id for made in done.get(run.id, [])):
            return []  # a retried step: this guild is revised already
        feedback = await signals.guild_feedback(
            session,
            guild_id=guild_id,
            start=run.window_start,
            end=run.window_end,
            per_person=SIGNALS_PER_PERSON,
            limit=SIGNAL_CAP,
        )
        # A paused person's feedback, and feedback on a reply to them, never shapes a style.
        paused = await consent.paused_among(session, set().union(*(s.people for s in feedback)))
        current = await current_style(session, services.settings.persona_path, guild_id)
    feedback = [signal for signal in feedback if not signal.people & paused]
    if not feedback:
        return []
    if await background_over_budget(services, guild_id=guild_id) is not None:
        return [f"style: guild {guild_id}: its daily token budget is spent; the style is kept"]
    try:
        async with asyncio.timeout(STEP_BUDGET_S):
            revised = await revise_style(services.chat, current, feedback)
    except (ChatFailed, TimeoutError):
        return [f"style: guild {guild_id}: the chat model gave no revision"]
    if (why := rejection(current, revised, feedback)) is not None:
        logger.warning(
            "style revision rejected",
            extra={"guild_id": guild_id, "reason": why, "chars": len(revised)},
        )
        return [f"style: guild {guild_id}: revision rejected ({why}); the style is kept"]
    sources = set().union(*(signal.people for signal in feedback)) - {services.bot_user_id}
    async with unit_of_work(services.sessions) as session:
        if await register.blocked(session, sources, since=read_at):
            return [f"style: guild {guild_id}: withheld, a source was erased"]
        await runs.add_style(
            session, guild_id=guild_id, content=revised, run_id=run.id, sources=sources
        )
    return []
