"""Step 11 made durable: the memory job records that it ran, and a sweep re-enqueues the
memory job of any posted reply whose job was lost (Redis flushed, worker gone)."""

from __future__ import annotations

import logging

from sqlalchemy import text

from app.db import unit_of_work
from app.memory.jobs import remember_after_reply
from app.services import Services
from app.turn import steps

log = logging.getLogger(__name__)

REMEMBER = "remember_after_reply"

# Replies posted (not apologies) between a day and ``grace`` ago whose memory job never
# recorded that it ran. Only MESSAGE_CREATE turns record a reply step, keyed by message id.
_LOST = text(
    r"""
    SELECT m.channel_id, m.id, (s.result -> 'message_ids' ->> -1)::bigint, m.author_id
    FROM completed_steps AS s
    JOIN messages AS m ON m.id = split_part(s.key, '\:', 2)::bigint
    WHERE s.done_at BETWEEN now() - interval '1 day' AND now() - make_interval(secs => :grace)
      AND s.key ~ '^turn\:[0-9]+\:reply$'
      AND coalesce((s.result ->> 'failed')::boolean, false) = false
      AND jsonb_array_length(coalesce(s.result -> 'message_ids', '[]'::jsonb)) > 0
      AND m.deleted_at IS NULL
      AND NOT EXISTS (
          SELECT 1 FROM completed_steps AS r
          WHERE r.key = 'turn\:' || split_part(s.key, '\:', 2) || '\:remembered'
      )
    ORDER BY s.done_at
    LIMIT :limit
    """
)


def remember_job_id(trigger_message_id: int) -> str:
    return f"remember:{trigger_message_id}"


async def remember(
    services: Services,
    *,
    channel_id: int,
    trigger_message_id: int,
    reply_message_id: int | None,
    speaker_id: int,
) -> None:
    """Run the memory write path for one reply, then record that it ran (whatever it did)."""
    await remember_after_reply(
        services,
        channel_id=channel_id,
        trigger_message_id=trigger_message_id,
        reply_message_id=reply_message_id,
        speaker_id=speaker_id,
    )
    async with unit_of_work(services.sessions) as session:
        await steps.record(session, steps.step_key(str(trigger_message_id), "remembered"), {})


async def resume_lost_memory_jobs(
    services: Services, *, grace_s: float = 180.0, limit: int = 200
) -> int:
    """Re-enqueue memory jobs that should have run; the job id and the write path's trigger
    keep a job that is merely slow from running twice."""
    if not services.settings.memory_active:
        return 0
    async with services.sessions() as session:
        lost = (await session.execute(_LOST, {"grace": grace_s, "limit": limit})).all()
    for channel_id, trigger_id, reply_id, speaker_id in lost:
        await services.queue.enqueue(
            REMEMBER,
            channel_id,
            trigger_id,
            reply_id,
            speaker_id,
            job_id=remember_job_id(trigger_id),
        )
    if lost:
        log.info("lost memory jobs re-enqueued", extra={"count": len(lost)})
    return len(lost)
