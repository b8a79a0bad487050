"""The turn: seed 002 steps 3–11 for one MESSAGE_CREATE.

Decide first, generate second, remember after. Every decision without an answer takes the
conservative branch (react 👍, write the reply, no correction, no memory write), and every
side effect is recorded per trigger so a retried job does it once."""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass
from typing import Any

from prometheus_client import Counter

from app.agent import TaskRequest
from app.channel import log as channel_log
from app.channel.exchange import Place
from app.channel.signals import add_signal
from app.chat.base import ChatFailed, ChatUnavailable, Purpose
from app.commands.dispatch import handle_command, is_staff
from app.commands.parser import parse_command
from app.db import unit_of_work
from app.decision.vocabulary import Question
from app.discord.errors import DiscordError, DiscordUnavailable
from app.discord.split import split_message
from app.inbound import steps
from app.inbound.frames import MessageCreate
from app.inbound.steps import Step
from app.kit.clock import utcnow
from app.kit.relevance import Query
from app.memory import consent, runs
from app.memory.jobs import REMEMBER, remember_job_id
from app.memory.recall import recall_query
from app.persona import load_persona
from app.services import Services
from app.structured import consolidation, observations
from app.structured.recall import PromptMemory, prompt_memory
from app.turn.prompt import ChatLine, assemble_prompt, task_lines

log = logging.getLogger(__name__)

FALLBACK_EMOJI = "👍"
APOLOGY = "Sorry, I couldn't put a reply together just now. Please try again in a moment."
TASK_LIMITED = (
    "I've already worked on quite a few tasks for you in the last hour, so I'll sit this one "
    "out. Ask me again a little later!"
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
    names: dict[int, str]
    done: dict[Step, dict[str, Any]]  # what an earlier run of this turn already did
    query: Query | None = None  # what relevance recall ranks by (MEMORY_RECALL=relevant)


@dataclass(frozen=True, slots=True)
class Reply:
    message_ids: list[int]
    failed: bool


async def run_turn(
    services: Services,
    message: MessageCreate,
    event_id: str,
    *,
    deadline: float | None = None,
    last_attempt: bool = True,
) -> None:
    """``deadline``: ``time.monotonic()`` when the hosting job is killed (None: no limit).
    ``last_attempt``: no retry follows if this run fails, so a model outage gets an apology
    now; before the last attempt it fails the run and the event's retry writes the reply."""
    if message.author.bot:  # our own echo is logged when posted; other bots are not turns
        return
    await _steps(services, message, event_id, deadline, last_attempt)
    # Observations were added on the way (the message, the reply): checked off the reply's
    # path. A turn that fails is retried, and the retry checks again.
    await consolidation.enqueue_if_due(services, message.channel_id)


async def _steps(
    services: Services,
    message: MessageCreate,
    event_id: str,
    deadline: float | None,
    last_attempt: bool,
) -> None:
    command = parse_command(message.content, services.bot_user_id)
    await log_message(services, message, event_id, observe=command is None)  # 3
    if command is not None:  # 4
        await handle_command(services, command, message, event_id)
        return _finish("command")
    await detect_correction(services, message)  # 5
    if not is_addressed(message, services.bot_user_id):  # 6
        return _finish("not_addressed")
    context = await load_context(services, message, event_id)  # 7
    if await react(services, message, context, event_id):  # 8
        return _finish("emoji_only")
    # 9, with step 10's memory read overlapped: the read is logged whichever path answers.
    wants_task, memory = await asyncio.gather(
        decide_task(services, message, context), recall(services, message, context)
    )
    reply = await respond(
        services,
        message,
        context,
        event_id,
        wants_task,
        memory,
        deadline=deadline,
        last_attempt=last_attempt,
    )  # 10
    await remember(services, message, reply, event_id)  # 11
    _finish("reply_failed" if reply.failed else "replied")


def _finish(outcome: str) -> None:
    turn_outcomes.labels(outcome=outcome).inc()


# 3. Log ---------------------------------------------------------------------------------


async def log_message(
    services: Services, message: MessageCreate, event_id: str, *, observe: bool
) -> None:
    """Append to the channel log; a non-command message is also a MEM-01 observation,
    unless its author paused learning (their words then never reach consolidation, nor
    later prompts as older conversation)."""
    async with unit_of_work(services.sessions) as session:
        paused = await consent.paused_since(session, message.author.id) is not None
        await channel_log.log_message(session, message, recallable=not paused)
        active = observe and services.settings.memory_active and not paused
        await observations.observe_message(session, message, event_id, active=active)


# 5. Corrections -------------------------------------------------------------------------


async def detect_correction(services: Services, message: MessageCreate) -> None:
    """A reply to a bot message that Jev calls a correction becomes a signal."""
    target = await _bot_message_replied_to(services, message)
    if target is None or not message.content.strip():
        return
    target_id, said = target
    prompt = f"Bot said:\n{said}\n\n{message.author_name} replied:\n{message.content}"
    if await services.decider.boolean(Question.IS_CORRECTION, prompt) is not True:
        return
    async with unit_of_work(services.sessions) as session:
        await add_signal(
            session,
            message_id=target_id,
            user_id=message.author.id,
            kind="correction",
            value=message.content,
        )


async def _bot_message_replied_to(
    services: Services, message: MessageCreate
) -> tuple[int, str] | None:
    """The bot message this one replies to (id, text): from our log, else from the event."""
    target_id = message.reply_to_id
    if target_id is None:
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


def is_addressed(message: MessageCreate, bot_user_id: int) -> bool:
    """A mention in the text, or a DM. A reply's implicit ping alone does not address us."""
    if message.guild_id is None:
        return True
    return f"<@{bot_user_id}>" in message.content or f"<@!{bot_user_id}>" in message.content


# 7. Context -----------------------------------------------------------------------------


TURN_STEPS = (Step.REACT, Step.TASK_GRANT, Step.TASK, Step.REPLY_TEXT, Step.REPLY)


async def load_context(services: Services, message: MessageCreate, event_id: str) -> Context:
    """The last 20 messages, the persona with the active style, and this turn's progress;
    with MEMORY_RECALL=relevant, also the query recall ranks by and, ahead of the 20, the
    older messages of this channel that bear on the message (dated)."""
    async with services.sessions() as session:
        recent = await channel_log.recent_messages(session, message.channel_id)
        style = await runs.active_style(session)
        done = await steps.done_many(session, event_id, TURN_STEPS)
    query = None
    if services.settings.recall_relevant:
        query = recall_query(message.content, [m.content for m in recent if m.id != message.id])
    older = await older_conversation(services, message.channel_id, recent, query)
    conversation = [
        ChatLine(m.author_name, m.is_bot, m.content, said_at=m.created_at) for m in older
    ]
    conversation += [ChatLine(m.author_name, m.is_bot, m.content) for m in recent]
    persona = load_persona(services.settings.persona_path, style.content if style else None)
    humans = [m for m in reversed(recent) if not m.is_bot]
    return Context(
        conversation=conversation,
        persona=persona,
        participant_ids=list(dict.fromkeys(m.author_id for m in humans)),
        names={m.author_id: m.author_name for m in reversed(humans)},
        done=done,
        query=query,
    )


async def older_conversation(
    services: Services,
    channel_id: int,
    recent: list[channel_log.LoggedMessage],
    query: Query | None,
) -> list[channel_log.LoggedMessage]:
    """Up to MEMORY_RECALL_MESSAGES messages of this channel from before the last 20 that
    bear on the query, oldest first; none without relevance recall, or when the last 20
    are all there is."""
    limit = services.settings.memory_recall_messages
    if query is None or limit == 0 or len(recent) < channel_log.CONTEXT_SIZE:
        return []
    async with unit_of_work(services.sessions) as session:  # it may fill in missing tokens
        return await channel_log.older_relevant(
            session, channel_id, before=recent[0], query=query, limit=limit
        )


def _decision_prompt(message: MessageCreate, context: Context) -> str:
    lines = "\n".join(task_lines(context.conversation, limit=8))
    return (
        f"Recent conversation:\n{lines}\n\n"
        f"Message to answer, from {message.author_name}:\n{message.content}"
    )


# 8. React -------------------------------------------------------------------------------


async def react(
    services: Services, message: MessageCreate, context: Context, event_id: str
) -> bool:
    """Add the acknowledgement reaction first; True when an emoji alone is enough."""
    decided = context.done.get(Step.REACT)
    if decided is None:
        prompt = _decision_prompt(message, context)
        palette = services.settings.reaction_emojis
        enough, emoji = await asyncio.gather(
            services.decider.boolean(Question.EMOJI_ENOUGH, prompt),
            services.decider.choice(Question.EMOJI_CHOICE, prompt, palette),
        )
        async with unit_of_work(services.sessions) as session:
            decided = await steps.record(
                session,
                event_id,
                Step.REACT,
                {"emoji": emoji or FALLBACK_EMOJI, "enough": enough is True},
            )
    try:
        await services.discord.add_reaction(message.channel_id, message.id, decided["emoji"])
    except DiscordError as exc:
        log.warning("reaction failed", extra={"error": type(exc).__name__})
    return bool(decided["enough"])


# 9. Task? -------------------------------------------------------------------------------


async def decide_task(services: Services, message: MessageCreate, context: Context) -> bool:
    if services.agent is None:
        return False
    prompt = _decision_prompt(message, context)
    return await services.decider.boolean(Question.IS_TASK, prompt) is True


# 10. Respond ----------------------------------------------------------------------------


async def recall(
    services: Services, message: MessageCreate, context: Context
) -> PromptMemory | None:
    """The reply prompt's memory part (pins, memories, episodes); every read is logged.
    None when an earlier run of this turn already fixed the reply text."""
    if Step.REPLY_TEXT in context.done:
        return None
    async with unit_of_work(services.sessions) as session:
        return await prompt_memory(
            session,
            services.settings,
            channel_id=message.channel_id,
            place=Place(message.guild_id),
            speaker_id=message.author.id,
            names={**context.names, message.author.id: message.author_name},
            participant_ids=context.participant_ids,
            query=context.query,
        )


async def respond(
    services: Services,
    message: MessageCreate,
    context: Context,
    event_id: str,
    wants_task: bool,
    memory: PromptMemory | None,
    *,
    deadline: float | None = None,
    last_attempt: bool = True,
) -> Reply:
    """Post one reply, once: the text is fixed before posting, the post is recorded after."""
    posted, planned = context.done.get(Step.REPLY), context.done.get(Step.REPLY_TEXT)
    if posted is not None:
        return Reply(message_ids=list(posted["message_ids"]), failed=bool(posted["failed"]))
    if planned is None:
        assert memory is not None  # recalled whenever the text is not fixed yet
        text, failed = await _compose(
            services,
            message,
            context,
            memory,
            event_id,
            wants_task=wants_task,
            deadline=deadline,
            last_attempt=last_attempt,
        )
        async with unit_of_work(services.sessions) as session:
            planned = await steps.record(
                session, event_id, Step.REPLY_TEXT, {"text": text, "failed": failed}
            )
    return await _post(services, message, event_id, planned["text"], bool(planned["failed"]))


async def _compose(
    services: Services,
    message: MessageCreate,
    context: Context,
    memory: PromptMemory,
    event_id: str,
    *,
    wants_task: bool,
    deadline: float | None,
    last_attempt: bool,
) -> tuple[str, bool]:
    if wants_task and services.agent is not None:
        text = await run_task(services, message, context, event_id, deadline)
        if text:
            return text, False
    try:
        return await write_reply(services, context, memory), False
    except ChatFailed as exc:
        if isinstance(exc, ChatUnavailable) and not last_attempt:
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
    event_id: str,
    deadline: float | None = None,
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
    budget_s = task_budget(deadline, time.monotonic(), services.settings.chat_timeout_s)
    if budget_s is not None and budget_s <= 0:
        log.warning("no time left for the task agent", extra={"budget_s": budget_s})
        task_requests.labels(outcome="no_time").inc()
        return None
    if not await _grant_task(services, message, event_id):
        return TASK_LIMITED
    request = TaskRequest(
        channel_id=message.channel_id,
        requester_name=message.author_name,
        request=message.content,
        recent_lines=task_lines(context.conversation, limit=10),
        persona=context.persona,
        requester_is_staff=is_staff(message, services.settings),
    )
    answer = await services.agent.run(request, budget_s=budget_s)
    async with unit_of_work(services.sessions) as session:
        recorded = await steps.record(session, event_id, Step.TASK, {"text": answer})
    task_requests.labels(outcome="answered" if answer else "no_answer").inc()
    text = recorded.get("text")
    return text if isinstance(text, str) else None


async def _grant_task(services: Services, message: MessageCreate, event_id: str) -> bool:
    """Spend one of the person's hourly tasks (TASKS_PER_USER_PER_HOUR, across workers);
    False past the limit, with the refusal recorded as this event's task result."""
    per_hour = services.settings.tasks_per_user_per_hour
    async with unit_of_work(services.sessions) as session:
        granted = await steps.grant_task(session, event_id, message.author.id, per_hour=per_hour)
        if not granted:
            refusal = {"text": TASK_LIMITED, "rate_limited": True}
            await steps.record(session, event_id, Step.TASK, refusal)
    if not granted:
        log.info("task refused: hourly limit reached", extra={"per_hour": per_hour})
        task_requests.labels(outcome="rate_limited").inc()
    return granted


async def write_reply(services: Services, context: Context, memory: PromptMemory) -> str:
    """The text path: assemble in the seed's order, generate."""
    prompt = assemble_prompt(
        channel_summary=memory.channel_summary,
        memory_block=memory.memory_block,
        conversation=context.conversation,
        persona=context.persona,
    )
    return await services.chat.write(
        Purpose.REPLY, system=prompt.system, messages=prompt.messages, max_tokens=1024
    )


async def _post(
    services: Services, message: MessageCreate, event_id: str, text: str, failed: bool
) -> Reply:
    try:
        ids = await services.discord.send_message(
            message.channel_id, text, nonce_key=event_id, reply_to=message.id
        )
    except DiscordUnavailable:
        raise  # Discord is down: the job fails and is retried; the nonce prevents a double post
    except DiscordError as exc:
        log.error("reply could not be posted", extra={"error": type(exc).__name__})
        ids = []
    now = utcnow()
    active = services.settings.memory_active
    async with unit_of_work(services.sessions) as session:
        for message_id, part in zip(ids, split_message(text), strict=False):
            await observations.observe_bot_message(
                session,
                message_id=message_id,
                channel_id=message.channel_id,
                guild_id=message.guild_id,
                bot_user_id=services.bot_user_id,
                content=part,
                event_id=f"bot:{message_id}",
                active=active,
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
        posted = {
            "message_ids": ids,
            "failed": failed,
            "channel_id": str(message.channel_id),
            "speaker_id": str(message.author.id),
        }
        await steps.record(session, event_id, Step.REPLY, posted)
    return Reply(message_ids=ids, failed=failed or not ids)


# 11. Remember ---------------------------------------------------------------------------


async def remember(services: Services, message: MessageCreate, reply: Reply, event_id: str) -> None:
    """Hand the exchange to the memory write path as its own job; it cannot touch the reply."""
    if reply.failed or not services.settings.memory_active:
        return
    try:
        await services.queue.enqueue(
            REMEMBER,
            message.channel_id,
            message.id,
            reply.message_ids[-1],
            message.author.id,
            job_id=remember_job_id(message.id),
        )
    except Exception as exc:
        log.warning("memory job not enqueued", extra={"error": type(exc).__name__})
