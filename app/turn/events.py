"""The event job: route one recorded gateway event to the step that handles it."""

from __future__ import annotations

import logging
from contextlib import AbstractContextManager
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy.ext.asyncio import AsyncSession

from app.channel import store as channel_log
from app.commands.interactions import answer_interaction
from app.consent.service import Learning
from app.db import unit_of_work
from app.directory import store as directory
from app.discord.errors import DiscordError, DiscordUnavailable
from app.frames.events import (
    IGNORED,
    Event,
    EventData,
    EventType,
    Ignored,
    Interaction,
    MessageCreate,
    MessageDelete,
    MessageDeleteBulk,
    MessageUpdate,
    ReactionAdd,
    Thread,
    parse_dispatch,
)
from app.inbound import store as inbox
from app.kit.clock import utcnow
from app.kit.logs import log_context
from app.observations import service as observations
from app.privacy import store as register
from app.privacy.identity import is_stub, without_reference_to
from app.services import Services
from app.signals import store as signals
from app.structured import consolidation
from app.turn.attempt import Attempt
from app.turn.pipeline import run_turn

log = logging.getLogger(__name__)

# A job whose attempt was claimed but that never reported back (killed, timed out).
JOB_LOST = "JobLost"


async def handle_event(services: Services, event_id: str, *, deadline: float | None = None) -> None:
    """Run one recorded event once more. ``deadline``: ``time.monotonic()`` by which the job
    is killed (None outside a job); a failure is recorded and retried later by the inbox's
    backoff, or dead-lettered when its attempts are spent. A call Discord refused (a 4xx
    other than 429) ends the event instead: the retry would be refused the same way."""
    opened = await _claim(services, event_id)
    if opened is None:
        return
    claimed, checked = opened
    try:
        # Unchecked only when the frame did not parse: parsing it again raises the error.
        parsed = checked.parsed if checked is not None else _parse(claimed)
        with _event_context(parsed, event_id):
            if isinstance(parsed, Event) and checked is not None and checked.runnable:
                attempt = Attempt(event_id, _since(parsed, claimed), deadline, claimed.last)
                await _run(services, parsed, attempt)
            async with unit_of_work(services.sessions) as session:
                await inbox.mark_handled(session, event_id)
    except Exception as exc:
        await _record_failure(services, event_id, claimed.attempts, type(exc).__name__)
        raise


@dataclass(frozen=True, slots=True)
class Checked:
    """The claimed frame parsed, and whether its author's erasure leaves it to run."""

    parsed: Event | Ignored
    runnable: bool


def _parse(claimed: inbox.Claimed) -> Event | Ignored:
    return IGNORED if is_stub(claimed.payload) else parse_dispatch(claimed.payload)


async def _run(services: Services, event: Event, attempt: Attempt) -> None:
    try:
        await _route(services, event, attempt)
    except DiscordError as exc:
        if isinstance(exc, DiscordUnavailable):
            raise  # Discord is down: the retry may well get through
        log.warning(
            "event ended: Discord refused a call, not retried",
            extra={"error": type(exc).__name__, "status": exc.status},
        )


async def _claim(services: Services, event_id: str) -> tuple[inbox.Claimed, Checked | None] | None:
    """Count the attempt and, in the same transaction, check the author's erasure (one
    commit before the turn, not two); None when the event is unknown, done, dead, or just
    given up. A frame that does not parse is left unchecked: its error is recorded as the
    attempt's failure."""
    async with unit_of_work(services.sessions) as session:
        claimed = await inbox.claim(session, event_id)
        checked = None
        if claimed is not None and not claimed.exhausted:
            try:
                parsed = _parse(claimed)
            except Exception:
                parsed = None
            if parsed is not None:
                event = parsed if isinstance(parsed, Event) else None
                runnable = event is None or await _runnable(session, event, claimed)
                checked = Checked(parsed, runnable)
    if claimed is not None and claimed.exhausted:
        # Its last attempt never reported back: running it again could kill this worker too.
        await _record_failure(services, event_id, claimed.attempts, JOB_LOST)
        return None
    return (claimed, checked) if claimed is not None else None


async def _record_failure(services: Services, event_id: str, attempt: int, error: str) -> None:
    try:
        async with unit_of_work(services.sessions) as session:
            failure = await inbox.record_failure(session, event_id, attempt, error)
    except Exception as exc:
        # Postgres is failing too: the claim already set when this attempt is due again.
        log.warning(
            "event failure not recorded", extra={"event_id": event_id, "error": type(exc).__name__}
        )
        return
    extra = {"event_id": event_id, "attempt": attempt, "error": error}
    if failure.retry_in is None:
        inbox.DEAD_LETTERS.inc()
        log.error("event dead-lettered after its retries", extra=extra)
    else:
        inbox.RETRIES.inc()
        log.warning(
            "event failed; retrying later",
            extra={**extra, "retry_in_s": failure.retry_in.total_seconds()},
        )


def _event_context(parsed: Event | Ignored, event_id: str) -> AbstractContextManager[None]:
    if not isinstance(parsed, Event):
        return log_context(event_id=event_id)
    channel_id = getattr(parsed.data, "channel_id", None)
    turn_id = event_id if isinstance(parsed.data, MessageCreate) else None
    return log_context(
        event_id=event_id, event_type=parsed.type.value, channel_id=channel_id, turn_id=turn_id
    )


def _since(event: Event, claimed: inbox.Claimed) -> datetime:
    """When the event began for us: recorded, or (a message) said, whichever was first."""
    if isinstance(event.data, MessageCreate):
        return min(claimed.received_at, event.data.timestamp)
    return claimed.received_at


async def _runnable(session: AsyncSession, event: Event, claimed: inbox.Claimed) -> bool:
    """False for an event of a person whose erasure began after it (a retry, a replay): it
    is closed unrun. A frame quoting a message of a person since erased (the bot's echo of a
    reply to them, say) keeps only the quote's ids."""
    author = event.author_id
    since = _since(event, claimed)
    if author is not None and await register.blocked(session, [author], since=since):
        log.info("event closed unrun: its author is being or was erased")
        return False
    await _forget_erased_quote(session, event, claimed.received_at)
    return True


async def _forget_erased_quote(session: AsyncSession, event: Event, received_at: datetime) -> None:
    data = event.data
    quoted = data.referenced_message if isinstance(data, MessageCreate) else None
    if quoted is None or quoted.author is None or quoted.author.id == event.author_id:
        return
    whose = quoted.author.id
    if await register.blocked(session, [whose], since=quoted.timestamp or received_at):
        await inbox.rewrite_frames(
            session, [event.dedupe_id], lambda frame: without_reference_to(frame, whose)
        )


async def _route(services: Services, event: Event, attempt: Attempt) -> None:
    """Messages are turns, interactions slash commands (or their autocomplete); edits, deletes
    and reactions update the log, the signals and the MEM-01 observations in one
    transaction, then may trigger a consolidation."""
    data = event.data
    if isinstance(data, MessageCreate):
        await run_turn(services, data, attempt)
        return
    if isinstance(data, Interaction):
        await answer_interaction(services, data, attempt.event_id)
        return
    if isinstance(data, Thread):
        await record_thread(services, data)
        return
    event_id = attempt.event_id
    learning = Learning.of(services.settings)
    async with unit_of_work(services.sessions) as session:
        match data:
            case MessageUpdate():
                # An edit older than the text logged is no news: not observed either.
                if await channel_log.apply_edit(session, data, utcnow()):
                    await observations.observe_edit(session, data, event_id, learning)
            case MessageDelete() | MessageDeleteBulk():
                ids = [data.id] if isinstance(data, MessageDelete) else data.ids
                await observations.observe_deletes(
                    session, data.channel_id, data.guild_id, ids, event_id, learning
                )
                await channel_log.mark_deleted(session, ids, utcnow(), channel_id=data.channel_id)
            case _:
                await record_reaction(session, data, services.bot_user_id)
                await observations.observe_reaction(
                    session,
                    event.type,
                    data,
                    event_id,
                    learning,
                    bot_user_id=services.bot_user_id,
                )
    await consolidation.enqueue_if_due(services, data.channel_id)


async def record_thread(services: Services, thread: Thread) -> None:
    """THREAD_CREATE / THREAD_UPDATE: where the thread hangs, so it follows its parent's
    pins, mode and persona. Every process's cached rules are dropped when that changed."""
    async with unit_of_work(services.sessions) as session:
        changed = await directory.record_channel(
            session,
            thread.id,
            guild_id=thread.guild_id,
            parent_id=thread.parent_id,
            name=thread.name or None,
            name_by=thread.owner_id,
            type_=thread.type if thread.type is not None else directory.PUBLIC_THREAD,
        )
    if changed:
        await services.channel_rules.invalidate()


async def record_reaction(session: AsyncSession, data: EventData, bot_id: int) -> bool:
    """Seed 002: only reactions added by someone other than the bot, on a message the bot
    authored, become signals. Removals never take a signal back. True when new."""
    if not isinstance(data, ReactionAdd) or data.user_id == bot_id:
        return False
    author = data.message_author_id
    if author is None:
        logged = await channel_log.get_message(session, data.message_id)
        author = logged.author_id if logged is not None else None
    if author != bot_id:
        return False
    return await signals.add_signal(
        session,
        message_id=data.message_id,
        user_id=data.user_id,
        kind="reaction",
        value=data.emoji.value,
    )


__all__ = ["EventType", "handle_event"]
