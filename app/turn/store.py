"""Per-event step records: what a job already did for one gateway event, so a retried or
replayed job does each side effect once. The one owner of `completed_steps`."""

from __future__ import annotations

from collections.abc import Collection, Iterable
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Any

from sqlalchemy import bindparam, delete, text
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.ext.asyncio import AsyncSession

from app.kit.locks import xact_lock
from app.models.inbox import CompletedStep


class Step(StrEnum):
    COMMAND = "command"  # a chat command ran (its answer may still be pending)
    REACT = "react"  # the reaction was chosen (emoji, and whether it is enough)
    TASK_GRANT = "task-grant"  # the person's hourly task quota was checked (granted or not)
    TASK = "task"  # the task agent's answer (text, or none), fixed before it is used
    REPLY_TEXT = "reply-text"  # the reply's text was fixed before posting
    REPLY = "reply"  # the reply was posted (message ids)
    REMEMBERED = "remembered"  # the memory write path ran after the reply
    NOTICE = "notice"  # a once-a-day notice was due for this event (or not), decided once
    RECALL_QUERY = "recall-query"  # the message's query vector (or that there was none)


async def done(session: AsyncSession, event_id: str, step: Step) -> dict[str, Any] | None:
    """The recorded result of a finished step, or None if it has not happened."""
    row = await session.get(CompletedStep, (event_id, step.value))
    return dict(row.result or {}) if row is not None else None


async def done_many(
    session: AsyncSession, event_id: str, wanted: Iterable[Step]
) -> dict[Step, dict[str, Any]]:
    """The recorded results among ``wanted`` (a missing step did not happen), in one read
    (a statement built once: a turn reads it before its first question)."""
    rows = await session.execute(
        _DONE_MANY, {"event_id": event_id, "steps": [step.value for step in wanted]}
    )
    return {Step(step): dict(result or {}) for step, result in rows}


_DONE_MANY = text(
    "SELECT step, result FROM completed_steps WHERE event_id = :event_id AND step = ANY(:steps)"
)


async def record(
    session: AsyncSession, event_id: str, step: Step, result: dict[str, Any]
) -> dict[str, Any]:
    """Record a step once; a concurrent or earlier record wins and its result is returned.
    One round trip when the record is new (the common case): the insert returns what it
    stored; only a conflict reads the record that won."""
    params = {"event_id": event_id, "step": step.value, "result": result}
    stored = await session.scalar(_RECORD, params)
    if stored is not None:
        return dict(stored)
    return await done(session, event_id, step) or result


# Built once, as _DONE_MANY: the reply's record is written while its post goes out.
_RECORD = text(
    "INSERT INTO completed_steps (event_id, step, result) VALUES (:event_id, :step, :result) "
    "ON CONFLICT DO NOTHING RETURNING result"
).bindparams(bindparam("result", type_=JSONB))


@dataclass(frozen=True, slots=True)
class PostedReply:
    """A reply the bot posted for a message: what the memory job needs to run."""

    trigger_message_id: int
    channel_id: int
    speaker_id: int
    reply_message_id: int | None


# Replies posted (not apologies) between a day and ``grace`` ago with no `remembered` step.
_NOT_REMEMBERED = text(
    """
    SELECT s.event_id, s.result
    FROM completed_steps AS s
    WHERE s.step = 'reply'
      AND s.done_at BETWEEN now() - interval '1 day' AND now() - make_interval(secs => :grace)
      AND coalesce((s.result ->> 'failed')::boolean, false) = false
      AND jsonb_array_length(coalesce(s.result -> 'message_ids', '[]'::jsonb)) > 0
      AND s.result ? 'channel_id'
      AND NOT EXISTS (
          SELECT 1 FROM completed_steps AS r
          WHERE r.event_id = s.event_id AND r.step = 'remembered'
      )
    ORDER BY s.done_at
    LIMIT :limit
    """
)


async def replies_not_remembered(
    session: AsyncSession, *, grace_s: float, limit: int
) -> list[PostedReply]:
    """Posted replies from the last day whose memory job never recorded that it ran."""
    rows = await session.execute(_NOT_REMEMBERED, {"grace": grace_s, "limit": limit})
    return [
        PostedReply(
            trigger_message_id=int(event_id),
            channel_id=int(result["channel_id"]),
            speaker_id=int(result["speaker_id"]),
            reply_message_id=int(result["message_ids"][-1]),
        )
        for event_id, result in rows
    ]


_TASK_GRANTS = text(
    """
    SELECT count(*) FROM completed_steps
    WHERE step = 'task-grant' AND result ->> 'user_id' = :user_id
      AND done_at > now() - interval '1 hour'
      AND coalesce((result ->> 'granted')::boolean, false)
    """
)


_TASK_GRANT_TIMES = text(
    """
    SELECT done_at FROM completed_steps
    WHERE step = 'task-grant' AND result ->> 'user_id' = :user_id
      AND done_at > now() - interval '1 hour'
      AND coalesce((result ->> 'granted')::boolean, false)
    """
)


async def grant_task(
    session: AsyncSession, event_id: str, user_id: int, *, per_hour: int, kept: int = 0
) -> bool:
    """Whether this event may run a task for ``user_id``: fewer than ``per_hour`` tasks of
    theirs were granted in the last hour, on any worker (``kept``: those an erasure of theirs
    still counts). Decided once per event (a retried job gets the same answer and spends no
    second grant); the caller commits it."""
    await xact_lock(session, "task-grant", user_id)  # one decision per person at a time
    earlier = await done(session, event_id, Step.TASK_GRANT)
    if earlier is not None:
        return bool(earlier.get("granted"))
    recent = int(await session.scalar(_TASK_GRANTS, {"user_id": str(user_id)}) or 0)
    granted = recent + kept < per_hour
    await record(session, event_id, Step.TASK_GRANT, {"user_id": str(user_id), "granted": granted})
    return granted


async def task_grants_within_the_hour(session: AsyncSession, user_id: int) -> list[datetime]:
    """When the person's task grants of the last hour were made (what an erasure keeps)."""
    return list(await session.scalars(_TASK_GRANT_TIMES, {"user_id": str(user_id)}))


_NOTICES_TODAY = text(
    """
    SELECT 1 FROM completed_steps
    WHERE step = 'notice' AND result ->> 'user_id' = :user_id
      AND result ->> 'kind' = :kind AND result ->> 'day' = :day
      AND coalesce((result ->> 'sent')::boolean, false)
      AND done_at > now() - interval '2 days'
    LIMIT 1
    """
)


async def notice_due(
    session: AsyncSession, event_id: str, user_id: int, *, kind: str, day: str
) -> bool:
    """Whether this event sends ``user_id`` the ``kind`` notice of ``day``: only the first
    of the day does, on any worker. Decided once per event (a retried job gets the same
    answer); the caller commits it."""
    await xact_lock(session, "notice", user_id)  # one decision per person at a time
    earlier = await done(session, event_id, Step.NOTICE)
    if earlier is not None:
        return bool(earlier.get("sent"))
    params = {"user_id": str(user_id), "kind": kind, "day": day}
    sent = await session.scalar(_NOTICES_TODAY, params) is None
    await record(session, event_id, Step.NOTICE, {**params, "sent": sent})
    return sent


async def prune(session: AsyncSession, *, older_than_days: int, keep: Iterable[str] = ()) -> int:
    """Step records are only needed while their event can still be replayed or retried:
    ``keep`` names the events still unfinished (pending or dead), whatever their age."""
    result = await session.execute(
        text(
            "DELETE FROM completed_steps WHERE done_at < now() - make_interval(days => :days) "
            "AND NOT (event_id = ANY(:keep))"
        ),
        {"days": older_than_days, "keep": list(keep)},
    )
    return int(getattr(result, "rowcount", 0))


async def forget_events(session: AsyncSession, event_ids: Collection[str]) -> int:
    """Drop every step record of these events (an erasure: their results quote the person)."""
    if not event_ids:
        return 0
    result = await session.execute(
        delete(CompletedStep)
        .where(CompletedStep.event_id.in_(list(event_ids)))
        .returning(CompletedStep.step)
    )
    return len(result.all())


async def blank_texts(session: AsyncSession, event_ids: Collection[str]) -> int:
    """Blank the text these events' turns fixed (the reply and the task's answer): their
    prompt held an erased person's memories."""
    if not event_ids:
        return 0
    result = await session.execute(
        text(
            "UPDATE completed_steps SET result = jsonb_set(result, '{text}', '\"\"'::jsonb) "
            "WHERE event_id = ANY(:ids) AND step IN ('reply-text', 'task') "
            "AND result ? 'text' AND coalesce(result ->> 'text', '') <> ''"
        ),
        {"ids": list(event_ids)},
    )
    return int(getattr(result, "rowcount", 0))
