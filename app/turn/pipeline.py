"""The turn: seed 002 steps 3–11 for one MESSAGE_CREATE.

Decide first, generate second, remember after. Every decision without an answer takes the
conservative branch (react 👍, write the reply, no correction, no memory write), and every
side effect is recorded per trigger so a retried job does it once. Step 6 also applies the
channel's mode (mention, free, off) and DMS_ENABLED; once step 8 says the turn will write,
"typing…" shows (after the reaction) until the reply is posted, and what the message carries
(its reply chain, its attachments) is read while step 9 is decided. Before any decision or
model call the person's rate limits and the day's token budgets hold (``app/turn/limits.py``),
and every model call is paid for by the speaker in the turn's place (the usage rows)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Collection
from contextlib import asynccontextmanager
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Any

from prometheus_client import Counter

from app.agent import TaskRequest
from app.channel import store as channel_log
from app.channel.exchange import Place
from app.chat.base import ChatFailed, ChatUnavailable, OverBudget, Purpose
from app.commands.answer import InChannel
from app.commands.authority import Authority
from app.commands.dispatch import handle_command
from app.commands.invocation import Invocation
from app.commands.limits import command_refused
from app.commands.parser import Command, parse_command
from app.consent import store as consent
from app.consent.service import Learning
from app.db import unit_of_work
from app.decision.vocabulary import Question
from app.directory.store import Mode, Rules
from app.discord.attachments import AttachmentRef, Fetched, Named, Skip, content_blocks
from app.discord.errors import DiscordError, DiscordUnavailable
from app.discord.split import split_message
from app.frames.events import Attachment, MessageCreate
from app.kit.attribution import Author, Labels
from app.kit.clock import jst_day, utcnow
from app.kit.loop import let_ready_run
from app.kit.relevance import Query
from app.kit.spend import paid_by
from app.kit.vectors import Embedding
from app.meaning.query import from_record, query_vector, recorded
from app.memory.jobs import enqueue_remember
from app.memory.recall import PromptMemory, prompt_memory, recall_query
from app.nightly import store as runs
from app.observations import service as observations
from app.persona import load_persona
from app.privacy import store as register
from app.services import Services
from app.signals.store import add_signal
from app.structured import consolidation
from app.turn import store as steps
from app.turn.attempt import Attempt
from app.turn.chain import reply_chain
from app.turn.channels import Placing, channel_rules, mention_rules
from app.turn.limits import OVER_BUDGET, Refused, refuse_turn
from app.turn.prompt import (
    ChatLine,
    Quoted,
    assemble_prompt,
    chain_lines,
    conversation_labels,
    correction_prompt,
    decision_prompt,
    task_authors,
    task_lines,
)
from app.turn.store import PostedReply, Step
from app.turn.typing import Typing

log = logging.getLogger(__name__)

FALLBACK_EMOJI = "👍"
APOLOGY = "Sorry, I couldn't put a reply together just now. Please try again in a moment."
TASK_LIMITED = (
    "I've already worked on quite a few tasks for you in the last hour, so I'll sit this one "
    "out. Ask me again a little later!"
)
DMS_OFF = (
    "I don't chat in DMs on this server's setup, sorry! Mention me in the server instead. "
    "`!memory …` and `!forgetme` still work here."
)
# What the turn still needs once the task agent is done, besides the chat call's own
# timeout (the written reply, should the agent give nothing): the post and the step records.
FALLBACK_MARGIN_S = 10.0

turn_outcomes = Counter("turn_outcomes_total", "Finished turns by how they ended", ["outcome"])
task_requests = Counter("task_requests_total", "Task requests by what became of them", ["outcome"])


@dataclass(frozen=True, slots=True)
class Context:
    conversation: list[ChatLine]
    persona: str
    participant_ids: list[int]  # human authors in the history tail, newest first
    done: dict[Step, dict[str, Any]]  # what an earlier run of this turn already did
    rules: Rules = field(default_factory=Rules)  # the channel's mode, persona, parent
    query: Query | None = None  # what relevance recall ranks by (MEMORY_RECALL=relevant)
    # The oldest of a full last 20: older conversation lies before it (relevance recall).
    earliest: channel_log.LoggedMessage | None = None


@dataclass(frozen=True, slots=True)
class Reply:
    message_ids: list[int]
    failed: bool


class Erased(Exception):
    """The speaker's erasure began after this turn did: the turn writes nothing more."""


async def run_turn(services: Services, message: MessageCreate, attempt: Attempt) -> None:
    """A model outage before ``attempt.last`` fails the run so the event's retry writes the
    reply; on the last attempt it gets an apology now."""
    if message.author.bot:  # our own echo is logged when posted; other bots are not turns
        return
    try:
        with paid_by(message.guild_id, message.author.id):  # every model call of the turn
            await _steps(services, message, attempt)
    except Erased:
        log.info("turn stopped: its author's erasure began meanwhile")
        return _finish("erased")
    # Observations were added on the way (the message, the reply): checked off the reply's
    # path. A turn that fails is retried, and the retry checks again.
    await consolidation.enqueue_if_due(services, message.channel_id)


async def _steps(services: Services, message: MessageCreate, attempt: Attempt) -> None:
    # A mention reads 6 and 7, passes the limits and sends its emoji questions first: they
    # need the message and its context, not the commit of its log row, which is written
    # while they are out. Every write of the turn comes after that commit.
    early = await ask_early(services, message, attempt)
    asking = early.asking if isinstance(early, Asked) else None
    try:
        logged = await log_message(services, message, attempt)  # 3
        if logged is None:
            return _finish("deleted")  # deleted before we got it: never context, never a turn
        if logged[0].content != message.content:
            early = None  # edited meanwhile: what was asked early was about other text
            await _settle_task(asking)
        message, command = logged
        if isinstance(early, Refused):
            return _finish(early)
        asked = early or await ask_in_order(services, message, command, attempt)
        if asked is not None:
            asking = asked.asking
            await _addressed(services, message, attempt, asked)
    finally:
        await _settle_task(asking)  # questions nobody will use (deleted, edited, failed)


async def _addressed(
    services: Services, message: MessageCreate, attempt: Attempt, asked: Asked
) -> None:
    # The message's query vector (relevance recall by meaning) is made while the turn reacts,
    # never in series with it.
    context = asked.context
    async with QueryVector.start(services, message, attempt) as meaning:
        reaction = await react(context, asked.asking)  # 8
        if reaction.enough:
            await add_reaction(services, message, attempt, reaction)
            return _finish("emoji_only")
        # 9 goes out first, the moment the emoji answers are in: the reaction's record and
        # PUT, step 10's memory read (logged whichever path answers), the reply chain and
        # attachments and then "typing…" (the turn writes either way) run while Jev
        # answers, never ahead of its question.
        written = Step.REPLY_TEXT in context.done  # by an earlier run: nothing to write
        writer = Writing(services, message, context.rules, written=written)
        wants_task = asyncio.create_task(decide_task(services, message, context))
        added: asyncio.Task[None] | None = None
        try:
            await let_ready_run()  # its first step queues the request's write, ahead of ours
            added = asyncio.create_task(_acknowledge(services, message, attempt, reaction, writer))
            writer.read_ahead()
            _, recalled, _ = await asyncio.gather(
                wants_task, recall(services, message, context, attempt, meaning), added
            )
        except BaseException:
            await writer.close()
            raise
        finally:
            await _settle_task(added)
            await _settle_task(wants_task)
    reply = await respond(
        services, message, context, attempt, wants_task.result(), recalled, writer
    )  # 10
    await remember(services, message, reply, attempt.event_id)  # 11
    _finish("reply_failed" if reply.failed else "replied")


@dataclass(frozen=True, slots=True)
class Asked:
    """An addressed turn that may ask its models: its context, and the emoji questions of
    step 8 in flight (or None when an earlier run of this turn already reacted)."""

    context: Context
    asking: asyncio.Task[tuple[bool | None, str | None]] | None


async def ask_early(
    services: Services, message: MessageCreate, attempt: Attempt
) -> Asked | Refused | None:
    """Before the log write: a message that mentions the bot as said (no command, replying
    to no bot message, neither deleted nor edited first) reads its rules and context, passes
    the limits and starts its emoji questions. None: the turn goes in order once the message
    is logged."""
    if not is_addressed(message, services.bot_user_id):
        return None
    if parse_command(message.content, services.bot_user_id) is not None:
        return None
    found, corrected, read = await asyncio.gather(
        mention_rules(services, message),
        _bot_message_corrected(services, message),
        read_context(services, message, attempt.event_id, before_log=True),
    )
    # A channel Discord is still to be asked about: the lookup cannot stop a mention's turn,
    # so it is made while the questions are out; its persona, model and pins are in place
    # before the reply needs them.
    placing, rules = (found, found.meanwhile) if isinstance(found, Placing) else (None, found)
    audience = addressing(
        message, services.bot_user_id, rules.mode, dms_enabled=services.settings.dms_enabled
    )
    if audience is not Audience.ADDRESSED or corrected is not None or read.changed:
        return None  # 5 and the notices come after the log, in order; so does text we
        # would not answer (what the log holds is the edit, or nothing)
    if refused := await within_limits(services, message, attempt, audience, corrected):
        return refused  # no model call: the channel is looked up when it next matters
    context = build_context(services, message, read, rules)
    asking = start_emoji_questions(services, message, context)
    if placing is not None:
        try:
            context = build_context(services, message, read, await placing.place())
        except BaseException:
            await _settle_task(asking)
            raise
    return Asked(context, asking)


async def ask_in_order(
    services: Services, message: MessageCreate, command: Command | None, attempt: Attempt
) -> Asked | None:
    """Steps 4–7 after the message is logged; None when the turn ends before step 8."""
    if command is not None:  # 4
        who = Invocation.of_message(message, attempt.event_id)
        answer = InChannel(services.discord, who)
        if await command_refused(services, who, answer):
            _finish(Refused.COMMAND_LIMITED)
            return None
        await handle_command(services, command, who, answer)
        _finish("command")
        return None
    mentioned = is_addressed(message, services.bot_user_id)
    rules = await channel_rules(services, message, mentioned=mentioned)
    audience = addressing(
        message, services.bot_user_id, rules.mode, dms_enabled=services.settings.dms_enabled
    )  # 6, decided before 5: the limits count only messages that would reach a model
    corrected = await _bot_message_corrected(services, message)
    if refused := await within_limits(services, message, attempt, audience, corrected):
        _finish(refused)
        return None
    await detect_correction(services, message, attempt, corrected)  # 5
    if audience is Audience.DMS_OFF:
        await dms_off_notice(services, message, attempt.event_id)
    if audience is not Audience.ADDRESSED:
        _finish(audience.value)
        return None
    context = await load_context(services, message, attempt.event_id, rules)  # 7
    return Asked(context, start_emoji_questions(services, message, context))


@asynccontextmanager
async def writing(
    services: Services, attempt: Attempt, speaker: int, others: Collection[int] = ()
) -> AsyncIterator[tuple[Any, set[int]]]:
    """A unit of work that writes about ``speaker`` (and ``others``): raises ``Erased`` when
    the speaker's erasure began after the turn did, and yields the session with those of
    ``others`` whom nothing may be written about any more."""
    async with unit_of_work(services.sessions) as session:
        erased = await register.blocked(session, {speaker, *others}, since=attempt.since)
        if speaker in erased:
            raise Erased
        yield session, erased


def _finish(outcome: str) -> None:
    turn_outcomes.labels(outcome=outcome).inc()


# 3. Log ---------------------------------------------------------------------------------


async def log_message(
    services: Services, message: MessageCreate, attempt: Attempt
) -> tuple[MessageCreate, Command | None] | None:
    """Append to the channel log; the message as logged (a delete or edit that came first is
    applied: None when it was deleted) and its command. A non-command message is also a
    MEM-01 observation, unless its author paused learning (their words then never reach
    consolidation, nor later prompts as older conversation)."""
    async with writing(services, attempt, message.author.id) as (session, _):
        paused = await consent.paused_since(session, message.author.id) is not None
        logged = await channel_log.log_message(session, message, recallable=not paused)
        if logged.deleted:
            return None
        if logged.content != message.content:
            message = message.model_copy(update={"content": logged.content})
        command = parse_command(message.content, services.bot_user_id)
        if command is None:  # a command is not something the person said
            learning = Learning.of(services.settings)
            await observations.observe_message(session, message, attempt.event_id, learning)
    return message, command


# Limits ---------------------------------------------------------------------------------


async def within_limits(
    services: Services,
    message: MessageCreate,
    attempt: Attempt,
    audience: Audience,
    corrected: tuple[int, str] | None,
) -> Refused | None:
    """Before any decision or model call: why this message may not reach a model (its
    person's rate limit or the day's token budget), or None. A message that would ask no
    model (not addressed, correcting nothing) is not counted."""
    addressed = audience is Audience.ADDRESSED
    if not addressed and corrected is None:
        return None
    return await refuse_turn(services, message, attempt.event_id, addressed=addressed)


# 5. Corrections -------------------------------------------------------------------------


async def detect_correction(
    services: Services,
    message: MessageCreate,
    attempt: Attempt,
    target: tuple[int, str] | None,
) -> None:
    """A reply to a bot message (``target``: its id and text) that Jev calls a correction
    becomes a signal."""
    if target is None:
        return
    target_id, said = target
    bot = Author(services.bot_user_id, services.bot_name, is_bot=True)
    member = Author(message.author.id, message.author_name)
    prompt = correction_prompt(bot, said, member, message.content)
    if await services.decider.boolean(Question.IS_CORRECTION, prompt) is not True:
        return
    async with writing(services, attempt, message.author.id) as (session, _):
        await add_signal(
            session,
            message_id=target_id,
            user_id=message.author.id,
            kind="correction",
            value=message.content,
        )


async def _bot_message_corrected(
    services: Services, message: MessageCreate
) -> tuple[int, str] | None:
    """The bot message this one may correct, replying to it with words (id, text): from our
    log, else from the event."""
    target_id = message.reply_to_id
    if target_id is None or not message.content.strip():
        return None
    async with services.sessions() as session:
        logged = await channel_log.get_message(session, target_id)
    if logged is not None:
        return (target_id, logged.content) if logged.author_id == services.bot_user_id else None
    quoted = message.referenced_message
    if (
        quoted is not None
        and quoted.author is not None
        and quoted.author.id == services.bot_user_id
    ):
        return target_id, quoted.content
    return None


# 6. Addressed? --------------------------------------------------------------------------


class Audience(StrEnum):
    """Whether this message is a turn for the bot, and if not, why (the turn's outcome)."""

    ADDRESSED = "addressed"
    NOT_ADDRESSED = "not_addressed"
    CHANNEL_OFF = "channel_off"  # an operator turned the bot off in this channel
    DMS_OFF = "dms_off"  # DMS_ENABLED=false: DM conversation gets a daily notice only


def is_addressed(message: MessageCreate, bot_user_id: int) -> bool:
    """A mention in the text, or a DM. A reply's implicit ping alone does not address us."""
    if message.guild_id is None:
        return True
    return f"<@{bot_user_id}>" in message.content or f"<@!{bot_user_id}>" in message.content


def addressing(
    message: MessageCreate, bot_user_id: int, mode: Mode, *, dms_enabled: bool
) -> Audience:
    """Decided once, here: seed 002's rule in `mention` channels (the default), every
    message in `free` ones, none in `off` ones; a DM unless DM conversation is off."""
    if message.guild_id is None:
        return Audience.ADDRESSED if dms_enabled else Audience.DMS_OFF
    if mode is Mode.OFF:
        return Audience.CHANNEL_OFF
    if mode is Mode.FREE or is_addressed(message, bot_user_id):
        return Audience.ADDRESSED
    return Audience.NOT_ADDRESSED


async def dms_off_notice(services: Services, message: MessageCreate, event_id: str) -> None:
    """One short notice per person per JST day; their other DMs that day get nothing."""
    day = jst_day(utcnow()).isoformat()
    async with unit_of_work(services.sessions) as session:
        due = await steps.notice_due(
            session, event_id, message.author.id, kind=Audience.DMS_OFF.value, day=day
        )
    if not due:
        return
    try:
        await services.discord.send_message(
            message.channel_id, DMS_OFF, nonce_key=f"dms-off:{event_id}", reply_to=message.id
        )
    except DiscordUnavailable:
        raise  # retried; the nonce keeps it to one notice
    except DiscordError as exc:
        log.info("DM notice not sent", extra={"error": type(exc).__name__})


# 7. Context -----------------------------------------------------------------------------


TURN_STEPS = (Step.REACT, Step.TASK_GRANT, Step.TASK, Step.REPLY_TEXT, Step.REPLY)


@dataclass(frozen=True, slots=True)
class ContextRead:
    """Step 7's reads: the channel's last 20 (the message among them once it is logged),
    the guild's active style, and what an earlier run of this turn already did."""

    recent: list[channel_log.LoggedMessage]
    style: str | None
    done: dict[Step, dict[str, Any]]
    changed: bool = False  # read before the log: a delete or edit of the message came first


async def read_context(
    services: Services, message: MessageCreate, event_id: str, *, before_log: bool = False
) -> ContextRead:
    async with services.sessions() as session:
        changed = before_log and await channel_log.arrived_changed(session, message)
        recent = await channel_log.recent_messages(session, message.channel_id)
        style = await runs.active_style(session, message.guild_id)
        done = await steps.done_many(session, event_id, TURN_STEPS)
    return ContextRead(recent, style.content if style else None, done, changed)


async def load_context(
    services: Services, message: MessageCreate, event_id: str, rules: Rules | None = None
) -> Context:
    """Step 7 for a logged message (see ``build_context``)."""
    return build_context(services, message, await read_context(services, message, event_id), rules)


def build_context(
    services: Services, message: MessageCreate, read: ContextRead, rules: Rules | None = None
) -> Context:
    """The last 20 messages with this one among them (read beside its log write, it is
    placed as the log will hold it), the persona with this guild's style (a DM: the file's)
    and this channel's addition, and this turn's progress; with MEMORY_RECALL=relevant, also
    the query recall ranks by and, ahead of the 20, the older messages of this channel that
    bear on the message (dated)."""
    rules = rules or Rules()
    recent = with_message(read.recent, message)
    query = None
    if services.settings.recall_relevant:
        query = recall_query(message.content, [m.content for m in recent if m.id != message.id])
    full = len(recent) >= channel_log.CONTEXT_SIZE
    conversation = [_line(m) for m in recent]
    persona = load_persona(services.settings.persona_path, read.style, rules.persona)
    humans = [m for m in reversed(recent) if not m.is_bot]
    return Context(
        conversation=conversation,
        persona=persona,
        participant_ids=list(dict.fromkeys(m.author_id for m in humans)),
        done=read.done,
        rules=rules,
        query=query,
        earliest=recent[0] if full else None,
    )


def with_message(
    recent: list[channel_log.LoggedMessage], message: MessageCreate
) -> list[channel_log.LoggedMessage]:
    """The last 20 as they are once ``message`` is logged: read before its commit, it is
    missing, and goes in by when it was said."""
    if any(m.id == message.id for m in recent):
        return recent
    merged = sorted([*recent, channel_log.as_logged(message)], key=lambda m: m.created_at)
    return merged[-channel_log.CONTEXT_SIZE :]


async def older_conversation(
    services: Services, message: MessageCreate, context: Context, meaning: Embedding | None
) -> list[ChatLine]:
    """Up to MEMORY_RECALL_MESSAGES messages of this channel from before the last 20 that
    bear on the message (its words, and with its vector its meaning), oldest first and dated;
    none without relevance recall, or when the last 20 are all there is."""
    limit = services.settings.memory_recall_messages
    if context.query is None or limit == 0 or context.earliest is None:
        return []
    async with unit_of_work(services.sessions) as session:  # it may fill in missing tokens
        older = await channel_log.older_relevant(
            session,
            message.channel_id,
            before=context.earliest,
            query=context.query,
            limit=limit,
            meaning=meaning,
        )
    return [_line(m, said_at=m.created_at) for m in older]


def _line(m: channel_log.LoggedMessage, said_at: datetime | None = None) -> ChatLine:
    return ChatLine(m.author_id, m.author_name, m.is_bot, m.content, m.attachments, said_at)


def _decision_prompt(message: MessageCreate, context: Context) -> str:
    return decision_prompt(context.conversation, _said(message))


def _said(message: MessageCreate) -> ChatLine:
    names = tuple(_ref(a).label for a in message.attachments)
    return ChatLine(message.author.id, message.author_name, False, message.content, names)


def _labels(message: MessageCreate, context: Context, carried: Carried) -> Labels:
    """The labels of one prompt: everyone its conversation and reply chain show."""
    return conversation_labels(context.conversation, carried.answering, _said(message).author)


# 8. React -------------------------------------------------------------------------------


def start_emoji_questions(
    services: Services, message: MessageCreate, context: Context
) -> asyncio.Task[tuple[bool | None, str | None]] | None:
    """Step 8's two questions, in parallel, started as soon as the context is known; None
    when an earlier run of this turn already reacted."""
    if Step.REACT in context.done:
        return None
    prompt = _decision_prompt(message, context)
    palette = services.settings.reaction_emojis

    async def ask() -> tuple[bool | None, str | None]:
        enough, emoji = await asyncio.gather(
            services.decider.boolean(Question.EMOJI_ENOUGH, prompt),
            services.decider.choice(Question.EMOJI_CHOICE, prompt, palette),
        )
        return enough, emoji

    return asyncio.create_task(ask())


@dataclass(frozen=True, slots=True)
class Reaction:
    """Step 8's decision: the emoji, whether it alone is enough, and whether an earlier run
    of this turn already recorded it."""

    emoji: str
    enough: bool
    recorded: bool


async def react(
    context: Context, asking: asyncio.Task[tuple[bool | None, str | None]] | None
) -> Reaction:
    """The acknowledgement reaction: the emoji answers, or what an earlier run recorded."""
    decided = context.done.get(Step.REACT)
    if decided is not None:
        return Reaction(str(decided["emoji"]), bool(decided["enough"]), recorded=True)
    assert asking is not None  # asked whenever the turn has not reacted yet
    enough, emoji = await asking
    return Reaction(emoji or FALLBACK_EMOJI, enough is True, recorded=False)


async def _acknowledge(
    services: Services,
    message: MessageCreate,
    attempt: Attempt,
    reaction: Reaction,
    writer: Writing,
) -> None:
    """The reaction, then "typing…": the reaction stays the first acknowledgement (SPEC,
    "Typing and attachments")."""
    await add_reaction(services, message, attempt, reaction)
    writer.start()


async def add_reaction(
    services: Services, message: MessageCreate, attempt: Attempt, reaction: Reaction
) -> None:
    """The choice is recorded, then the reaction is added; nothing else in the turn waits
    for either. The record precedes the PUT: a retry adds the recorded emoji again (a no-op
    on Discord), where one that asked again might pick another and leave two reactions."""
    emoji = reaction.emoji
    if not reaction.recorded:
        decided = {"emoji": emoji, "enough": reaction.enough}
        async with writing(services, attempt, message.author.id) as (session, _):
            decided = await steps.record(session, attempt.event_id, Step.REACT, decided)
        emoji = str(decided["emoji"])
    try:
        await services.discord.add_reaction(message.channel_id, message.id, emoji)
    except DiscordError as exc:
        log.warning("reaction failed", extra={"error": type(exc).__name__})


# 9. Task? -------------------------------------------------------------------------------


async def decide_task(services: Services, message: MessageCreate, context: Context) -> bool:
    if services.agent is None:
        return False
    prompt = _decision_prompt(message, context)
    return await services.decider.boolean(Question.IS_TASK, prompt) is True


# 10. Respond ----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Recalled:
    """What step 10 read for the reply: the memory part, and the older conversation that
    bears on the message (dated lines ahead of the last 20)."""

    memory: PromptMemory
    earlier: list[ChatLine] = field(default_factory=list)


class QueryVector:
    """The message's query vector for relevance recall by meaning: one embedding call per
    event (its result, or that there was none, is recorded with the event's steps, so a
    retried turn does not embed again), started as soon as the turn is addressed and awaited
    only by the reads that use it. Without an embedder or relevance recall: None at once."""

    def __init__(self, task: asyncio.Task[Embedding | None] | None) -> None:
        self._task = task

    @classmethod
    @asynccontextmanager
    async def start(
        cls, services: Services, message: MessageCreate, attempt: Attempt
    ) -> AsyncIterator[QueryVector]:
        task = None
        if services.embedder is not None and services.settings.recall_relevant:
            task = asyncio.create_task(_embed_once(services, message, attempt))
        try:
            yield cls(task)
        finally:
            await _settle_task(task)

    async def vector(self) -> Embedding | None:
        return await self._task if self._task is not None else None


async def _embed_once(
    services: Services, message: MessageCreate, attempt: Attempt
) -> Embedding | None:
    assert services.embedder is not None
    space = services.embedder.space
    async with services.sessions() as session:
        earlier = await steps.done(session, attempt.event_id, Step.RECALL_QUERY)
    if earlier is not None:
        return from_record(earlier, space)
    timeout_s = services.settings.embeddings_query_timeout_s
    vector = await query_vector(services.embedder, message.content, timeout_s=timeout_s)
    async with writing(services, attempt, message.author.id) as (session, _):
        kept = await steps.record(session, attempt.event_id, Step.RECALL_QUERY, recorded(vector))
    return from_record(kept, space)


async def _settle_task(task: asyncio.Task[Any] | None) -> None:
    """A task nobody awaited (a vector when the emoji was enough, anything when the turn
    failed): cancelled, or its outcome collected, so no task outlives its turn."""
    if task is None:
        return
    if not task.done():
        task.cancel()
    with contextlib.suppress(asyncio.CancelledError, Exception):
        await task


async def recall(
    services: Services,
    message: MessageCreate,
    context: Context,
    attempt: Attempt,
    meaning: QueryVector | None = None,
) -> Recalled | None:
    """The reply prompt's memory part (pins, memories, episodes) and the older conversation;
    every memory read is logged, with the turn as its trigger. Nobody whose erasure is under
    way is recalled. None when an earlier run of this turn already fixed the reply text."""
    if Step.REPLY_TEXT in context.done:
        return None
    vector = await meaning.vector() if meaning is not None else None
    earlier, memory = await asyncio.gather(
        older_conversation(services, message, context, vector),
        memory_part(services, message, context, attempt, vector),
    )
    return Recalled(memory, earlier)


async def memory_part(
    services: Services,
    message: MessageCreate,
    context: Context,
    attempt: Attempt,
    vector: Embedding | None,
) -> PromptMemory:
    speaker = message.author.id
    # The memory block names people as the conversation's lines label them.
    labels = conversation_labels(context.conversation, (), _said(message).author)
    names = {person: labels[person] for person in (speaker, *context.participant_ids)}
    async with writing(services, attempt, speaker, context.participant_ids) as (session, gone):
        return await prompt_memory(
            session,
            services.settings,
            channel_id=message.channel_id,
            parent_channel_id=context.rules.parent_id,
            place=Place(message.guild_id),
            speaker_id=speaker,
            names=names,
            participant_ids=[p for p in context.participant_ids if p not in gone],
            event_id=attempt.event_id,
            query=context.query,
            meaning=vector,
        )


async def respond(
    services: Services,
    message: MessageCreate,
    context: Context,
    attempt: Attempt,
    wants_task: bool,
    recalled: Recalled | None,
    writer: Writing,
) -> Reply:
    """Post one reply, once: the text is fixed as it is posted, the post is recorded after.
    "Bot is typing…" (``writer``, started by the turn once it knew it would write) shows
    until just before the post (the post itself ends it on Discord)."""
    async with writer:
        posted, planned = context.done.get(Step.REPLY), context.done.get(Step.REPLY_TEXT)
        if posted is not None:
            return Reply(message_ids=list(posted["message_ids"]), failed=bool(posted["failed"]))
        if planned is not None:  # fixed by an earlier run: posted again (the nonce keeps it one)
            ids = await _checked_send(services, message, attempt, planned)
            return await _post(services, message, attempt, planned, ids)
        assert recalled is not None  # recalled whenever the text is not fixed yet
        memory = recalled.memory
        context = replace(context, conversation=[*recalled.earlier, *context.conversation])
        planned, sending = await _fix_text(
            services, message, context, attempt, writer, memory, wants_task
        )
    return await _post(services, message, attempt, planned, await sending)


async def _fix_text(
    services: Services,
    message: MessageCreate,
    context: Context,
    attempt: Attempt,
    writer: Writing,
    memory: PromptMemory,
    wants_task: bool,
) -> tuple[dict[str, Any], asyncio.Task[list[int]]]:
    """Compose the reply's text, and post it while its record commits. A participant whose
    memories the prompt held and whose erasure began meanwhile is left out: the text is
    composed once more without. The erasure check precedes the post; the record need not:
    the post carries the event's nonce with ``enforce_nonce``, so a retry that finds no
    record (killed before the commit) composes again and Discord hands back the first post
    rather than making a second."""
    for _ in range(2):
        text, failed = await _compose(
            services, message, context, memory, attempt, writer, wants_task=wants_task
        )
        owners = sorted(memory.owners)
        result = {"text": text, "failed": failed, "owners": [str(o) for o in owners]}
        sending = None
        await writer.done()  # never inside the transaction below: it holds the guard
        try:
            async with writing(services, attempt, message.author.id, owners) as (session, gone):
                if not gone:
                    sending = asyncio.create_task(_send(services, message, attempt, result))
                    result = await steps.record(session, attempt.event_id, Step.REPLY_TEXT, result)
        except Exception:
            # The record failed, not the post: it lands, and the retry posts with the same
            # nonce, so Discord hands this one back.
            if sending is not None:
                with contextlib.suppress(Exception):
                    await sending
            raise
        except BaseException:
            await _settle_task(sending)
            raise
        if sending is not None:
            return result, sending
        again = await recall(services, message, context, attempt)
        assert again is not None
        memory = again.memory
    planned = {"text": APOLOGY, "failed": True, "owners": []}
    return planned, asyncio.create_task(_checked_send(services, message, attempt, planned))


@dataclass(frozen=True, slots=True)
class Carried:
    """What the reply reads besides the conversation: the reply chain and the attachments."""

    answering: list[Quoted]
    attachments: list[Fetched]


class Writing:
    """The turn will write: "typing…" shows, and what the message carries (its reply chain,
    its attachments) is read once for whichever path writes. Both start as soon as the turn
    knows it will write (typing once the reaction is added), so they go on while Jev decides
    whether the message is a task; ended (``async with``) before the reply is posted, so no
    indicator outlives it."""

    def __init__(
        self, services: Services, message: MessageCreate, rules: Rules, *, written: bool = False
    ) -> None:
        """``written``: an earlier run fixed the text, so there is nothing to type or read
        (the writer starts closed)."""
        self._services, self._message, self._rules = services, message, rules
        self._typing = Typing(services.discord, message.channel_id)
        self._reading: asyncio.Task[Carried] | None = None
        self._closed = written

    @property
    def model(self) -> str | None:
        """The channel's chat model (`!bot channel model`); None: CHAT_MODEL."""
        return self._rules.model

    def read_ahead(self) -> None:
        """The reply chain and attachments on their way (idempotent; not once closed)."""
        if self._reading is None and not self._closed:
            self._reading = asyncio.create_task(self._read())

    def start(self) -> None:
        """Typing on, and the reply chain and attachments on their way (idempotent; not
        once closed: a step that ends after the turn failed starts nothing)."""
        if not self._closed:
            self._typing.start()
            self.read_ahead()

    async def begin(self) -> Carried:
        """What the message carries, once read (starting the writing if it had not)."""
        self.start()
        assert self._reading is not None
        return await self._reading

    async def done(self) -> None:
        """The text is written: typing stops before the post, so no indicator outlives it."""
        await self._typing.stop()

    async def __aenter__(self) -> Writing:
        return self

    async def __aexit__(self, *_: object) -> None:
        await self.close()

    async def close(self) -> None:
        self._closed = True
        await self._typing.stop()
        await _settle_task(self._reading)  # read for a path that did not write

    async def _read(self) -> Carried:
        answering, attachments = await asyncio.gather(
            reply_chain(self._services, self._message, self._rules),
            _attachments(self._services, self._message),
        )
        return Carried(answering, attachments)


async def _attachments(services: Services, message: MessageCreate) -> list[Fetched]:
    refs = [_ref(a) for a in message.attachments]
    if services.attachments is None:
        return [Named(ref, Skip.FAILED) for ref in refs]
    return await services.attachments.fetch_all(refs)


def _ref(attachment: Attachment) -> AttachmentRef:
    return AttachmentRef(
        attachment.filename, attachment.content_type, attachment.size, attachment.url
    )


async def _compose(
    services: Services,
    message: MessageCreate,
    context: Context,
    memory: PromptMemory,
    attempt: Attempt,
    writer: Writing,
    *,
    wants_task: bool,
) -> tuple[str, bool]:
    if wants_task and services.agent is not None:
        text = await run_task(services, message, context, attempt, writer)
        if text:
            return text, False
    carried = await writer.begin()
    try:
        reply = await write_reply(services, message, context, memory, carried, model=writer.model)
        return reply, False
    except OverBudget as exc:
        log.info("reply refused: daily token budget spent", extra={"budget": exc.budget.value})
        return OVER_BUDGET[exc.budget], True
    except ChatFailed as exc:
        if isinstance(exc, ChatUnavailable) and not attempt.last:
            # An outage: nothing is fixed yet, so the event's retry (seconds, then minutes
            # apart) writes the real reply once the model is back.
            log.warning(
                "chat model unavailable; the reply waits for a retry", extra={"error": str(exc)}
            )
            raise
        log.error("reply generation failed; posting an apology", extra={"error": str(exc)})
        return APOLOGY, True


def task_budget(deadline: float | None, now: float, chat_timeout_s: float) -> float | None:
    """The task agent's time: what is left of the job (``deadline`` and ``now`` on the
    monotonic clock) less what the written reply and its post need should the agent give
    nothing. None without a deadline (the agent's own cap applies)."""
    if deadline is None:
        return None
    return deadline - now - chat_timeout_s - FALLBACK_MARGIN_S


async def run_task(
    services: Services,
    message: MessageCreate,
    context: Context,
    attempt: Attempt,
    writer: Writing,
) -> str | None:
    """The text the task path posts: the agent's answer, or the polite refusal past the
    person's hourly limit; None to write the normal reply. The agent runs at most once per
    event: its answer is recorded before it is used, so a retried job never runs tools again."""
    assert services.agent is not None
    if (recorded := context.done.get(Step.TASK)) is not None:
        text = recorded.get("text")
        return text if isinstance(text, str) else None
    if Step.TASK_GRANT in context.done:
        # An earlier run was granted the task and ended before recording the agent's answer
        # (killed mid-task): running the tools again could repeat what they did.
        log.warning("task interrupted on an earlier attempt; writing the normal reply")
        task_requests.labels(outcome="interrupted").inc()
        return None
    budget_s = task_budget(attempt.deadline, time.monotonic(), services.settings.chat_timeout_s)
    if budget_s is not None and budget_s <= 0:
        log.warning("no time left for the task agent", extra={"budget_s": budget_s})
        task_requests.labels(outcome="no_time").inc()
        return None
    if not await _grant_task(services, message, attempt):
        return TASK_LIMITED
    carried = await writer.begin()
    labels = _labels(message, context, carried)
    request = TaskRequest(
        channel_id=message.channel_id,
        requester_name=labels[message.author.id],
        request=message.content,
        recent_lines=task_lines(context.conversation, labels),
        persona=context.persona,
        requester_is_staff=Authority.of(
            Invocation.of_message(message, attempt.event_id), services.settings
        ).is_staff,
        answering=tuple(chain_lines(carried.answering, labels)),
        attachments=tuple(carried.attachments),
        author_ids=task_authors(context.conversation, carried.answering, message.author.id),
        since=attempt.since,
        model=writer.model,
    )
    outcome: dict[str, Any]
    try:
        answer = await services.agent.run(request, budget_s=budget_s)
        outcome = {"text": answer}
    except OverBudget as exc:  # a step found the day's budget spent: the task stops here
        answer, outcome = None, {"text": OVER_BUDGET[exc.budget], "over_budget": True}
    async with writing(services, attempt, message.author.id) as (session, _):
        recorded = await steps.record(session, attempt.event_id, Step.TASK, outcome)
    label = "over_budget" if outcome.get("over_budget") else "answered" if answer else "no_answer"
    task_requests.labels(outcome=label).inc()
    text = recorded.get("text")
    return text if isinstance(text, str) else None


async def _grant_task(services: Services, message: MessageCreate, attempt: Attempt) -> bool:
    """Spend one of the person's hourly tasks (TASKS_PER_USER_PER_HOUR, across workers);
    False past the limit, with the refusal recorded as this event's task result."""
    per_hour = services.settings.tasks_per_user_per_hour
    event_id, speaker = attempt.event_id, message.author.id
    async with writing(services, attempt, speaker) as (session, _):
        hour_ago = utcnow() - timedelta(hours=1)
        kept = await register.kept_task_grants(session, speaker, since=hour_ago)  # erased
        granted = await steps.grant_task(session, event_id, speaker, per_hour=per_hour, kept=kept)
        if not granted:
            refusal = {"text": TASK_LIMITED, "rate_limited": True}
            await steps.record(session, event_id, Step.TASK, refusal)
    if not granted:
        log.info("task refused: hourly limit reached", extra={"per_hour": per_hour})
        task_requests.labels(outcome="rate_limited").inc()
    return granted


async def write_reply(
    services: Services,
    message: MessageCreate,
    context: Context,
    memory: PromptMemory,
    carried: Carried | None = None,
    *,
    model: str | None = None,
) -> str:
    """The text path: assemble in the seed's order, generate. Images and files reach the
    chat model here, as content blocks of the message's own turn."""
    carried = carried or Carried([], [])
    labels = _labels(message, context, carried)
    prompt = assemble_prompt(
        channel_summary=memory.channel_summary,
        memory_block=memory.memory_block,
        conversation=context.conversation,
        persona=context.persona,
        answering=carried.answering,
        attached=content_blocks(labels[message.author.id], carried.attachments),
        labels=labels,
    )
    return await services.chat.write(
        Purpose.REPLY, system=prompt.system, messages=prompt.messages, max_tokens=1024, model=model
    )


async def _checked_send(
    services: Services, message: MessageCreate, attempt: Attempt, planned: dict[str, Any]
) -> list[int]:
    """``_send`` once the speaker's erasure is known not to have begun (``Erased``)."""
    owners = [int(o) for o in planned.get("owners", [])]
    async with writing(services, attempt, message.author.id, owners):
        pass  # checked before posting: an erased speaker gets no reply
    return await _send(services, message, attempt, planned)


async def _send(
    services: Services, message: MessageCreate, attempt: Attempt, planned: dict[str, Any]
) -> list[int]:
    """Post the fixed text; its message ids ([] when Discord refused it)."""
    try:
        return await services.discord.send_message(
            message.channel_id,
            str(planned["text"]),
            nonce_key=attempt.event_id,
            reply_to=message.id,
        )
    except DiscordUnavailable:
        raise  # Discord is down: the job fails and is retried; the nonce prevents a double post
    except DiscordError as exc:
        log.error("reply could not be posted", extra={"error": type(exc).__name__})
        return []


async def _post(
    services: Services,
    message: MessageCreate,
    attempt: Attempt,
    planned: dict[str, Any],
    ids: list[int],
) -> Reply:
    """Log the posted text. A reply whose prompt held someone erased meanwhile is logged
    blank."""
    text, failed = str(planned["text"]), bool(planned["failed"])
    owners = [int(o) for o in planned.get("owners", [])]
    async with writing(services, attempt, message.author.id, owners) as (session, gone):
        await _log_reply(services, session, message, ids, "" if gone else text)
        posted = {
            "message_ids": ids,
            "failed": failed,
            "channel_id": str(message.channel_id),
            "speaker_id": str(message.author.id),
        }
        await steps.record(session, attempt.event_id, Step.REPLY, posted)
    return Reply(message_ids=ids, failed=failed or not ids)


async def _log_reply(
    services: Services, session: Any, message: MessageCreate, ids: list[int], text: str
) -> None:
    """The posted parts in the channel log (and as observations, unless blank)."""
    now = utcnow()
    # The answer to someone who paused learning is no more observed than what they said.
    observed = bool(text) and await Learning.of(services.settings).allows(
        session, message.author.id
    )
    learning = Learning(observed)
    parts = split_message(text) if text else [""] * len(ids)
    for message_id, part in zip(ids, parts, strict=False):
        await observations.observe_bot_message(
            session,
            message_id=message_id,
            channel_id=message.channel_id,
            guild_id=message.guild_id,
            bot_user_id=services.bot_user_id,
            content=part,
            event_id=f"bot:{message_id}",
            learning=learning,
        )
        await channel_log.log_bot_message(
            session,
            message_id=message_id,
            channel_id=message.channel_id,
            guild_id=message.guild_id,
            bot_user_id=services.bot_user_id,
            bot_name=services.bot_name,
            content=part,
            reply_to_id=message.id,
            created_at=now,
        )


# 11. Remember ---------------------------------------------------------------------------


async def remember(services: Services, message: MessageCreate, reply: Reply, event_id: str) -> None:
    """Hand the exchange to the memory write path as its own job; it cannot touch the reply."""
    if reply.failed or not services.settings.memory_active:
        return
    try:
        posted = PostedReply(
            message.id, message.channel_id, message.author.id, reply.message_ids[-1]
        )
        await enqueue_remember(services.queue, posted)
    except Exception as exc:
        log.warning("memory job not enqueued", extra={"error": type(exc).__name__})
