"""Step 11 as a job of its own: after a reply is posted, run the memory write path over the
exchange and record that it ran; a sweep re-enqueues the job of any posted reply whose job
was lost (Redis flushed, worker gone). app/worker.py registers these with ARQ."""

from __future__ import annotations

import logging

from app.channel import store as channel_log
from app.channel.exchange import EXCHANGE_SIZE, Place, build_exchange
from app.channel.store import line_of
from app.db import unit_of_work
from app.kit.logs import log_context
from app.kit.queue import Job, JobQueue
from app.memory.write_path import WriteOutcome, run_write_path
from app.services import Services
from app.turn import store as steps
from app.turn.store import PostedReply, Step
from app.vocabulary import Actor

logger = logging.getLogger(__name__)


def remember_job_id(trigger_message_id: int) -> str:
    return f"remember:{trigger_message_id}"


async def remember_after_reply(services: Services, reply: PostedReply) -> WriteOutcome:
    """Extraction after a reply, then a durable record that it ran (whatever it did)."""
    outcome = await _extract(services, reply)
    async with unit_of_work(services.sessions) as session:
        await steps.record(session, str(reply.trigger_message_id), Step.REMEMBERED, {})
    return outcome


async def _extract(services: Services, reply: PostedReply) -> WriteOutcome:
    """The channel's last six messages up to the bot's reply, through the write path."""
    if not services.settings.memory_active:
        return WriteOutcome(stopped="memory_off")
    with log_context(channel_id=reply.channel_id, trigger_id=reply.trigger_message_id):
        async with services.sessions() as session:
            messages = await channel_log.exchange_messages(
                session,
                channel_id=reply.channel_id,
                trigger_message_id=reply.trigger_message_id,
                reply_message_id=reply.reply_message_id,
                size=EXCHANGE_SIZE,
            )
        exchange = build_exchange(
            [line_of(m) for m in messages],
            speaker_id=reply.speaker_id,
            place=Place(messages[-1].guild_id) if messages else None,
            trigger_id=reply.trigger_message_id,
        )
        outcome = await run_write_path(
            services, exchange, actor=Actor.EXTRACTION, trigger=f"reply:{reply.trigger_message_id}"
        )
        logger.info(
            "memory extraction done",
            extra={
                "stopped": outcome.stopped,
                "added": outcome.added,
                "updated": outcome.updated,
                "deleted": outcome.deleted,
                "discarded": len(outcome.discarded),
                "skipped": outcome.skipped,
            },
        )
        return outcome


async def _remember_job(
    services: Services,
    *,
    channel_id: int,
    trigger_message_id: int,
    reply_message_id: int | None,
    speaker_id: int,
) -> WriteOutcome:
    reply = PostedReply(trigger_message_id, channel_id, speaker_id, reply_message_id)
    return await remember_after_reply(services, reply)


REMEMBER = Job("remember_after_reply", _remember_job)


async def enqueue_remember(queue: JobQueue, reply: PostedReply) -> bool:
    """Step 11's job for a posted reply (once per trigger: the job id)."""
    send = REMEMBER.send(queue, remember_job_id(reply.trigger_message_id))
    return await send(
        channel_id=reply.channel_id,
        trigger_message_id=reply.trigger_message_id,
        reply_message_id=reply.reply_message_id,
        speaker_id=reply.speaker_id,
    )


async def resume_lost_memory_jobs(
    services: Services, *, grace_s: float = 180.0, limit: int = 200
) -> int:
    """Re-enqueue memory jobs that should have run; the job id and the write path's trigger
    keep a job that is merely slow from running twice."""
    if not services.settings.memory_active:
        return 0
    async with services.sessions() as session:
        lost = await steps.replies_not_remembered(session, grace_s=grace_s, limit=limit)
    for reply in lost:
        await enqueue_remember(services.queue, reply)
    if lost:
        logger.info("lost memory jobs re-enqueued", extra={"count": len(lost)})
    return len(lost)
