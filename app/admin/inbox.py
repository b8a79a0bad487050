"""Admin endpoints for dead letters: events given up after their retries, and replaying one."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Path, Query, status

from app.admin.auth import require_admin
from app.admin.deps import get_queue, get_sessions
from app.admin.errors import EventNotDead, NotFound, responses
from app.admin.schemas import (
    AUTH_ERRORS,
    DeadLetterBody,
    DeadLettersBody,
    ReplayQueuedBody,
)
from app.db import SessionFactory, unit_of_work
from app.inbound import store as inbox
from app.kit.queue import JobQueue

router = APIRouter(tags=["admin"], dependencies=[Depends(require_admin)], responses=AUTH_ERRORS)

Sessions = Annotated[SessionFactory, Depends(get_sessions)]
EventId = Annotated[str, Path(min_length=1, max_length=512)]


@router.get(
    "/inbox/dead",
    response_model=DeadLettersBody,
    summary="Events given up after their retries (dead letters), newest first",
)
async def list_dead(
    sessions: Sessions, limit: Annotated[int, Query(ge=1, le=1000)] = 100
) -> DeadLettersBody:
    async with sessions() as session:
        dead, total = await inbox.dead_letters(session, limit=limit)
    return DeadLettersBody(
        events=[
            DeadLetterBody(
                id=letter.id,
                type=letter.event_type,
                received_at=letter.received_at,
                dead_at=letter.dead_at,
                attempts=letter.attempts,
                last_error=letter.last_error,
            )
            for letter in dead
        ],
        total=total,
    )


@router.post(
    "/inbox/{event_id}/replay",
    status_code=status.HTTP_202_ACCEPTED,
    response_model=ReplayQueuedBody,
    responses=responses(NotFound, EventNotDead, NotFound="no such event"),
    summary="Run a dead letter once more, with a fresh set of attempts",
)
async def replay_dead(
    sessions: Sessions, queue: Annotated[JobQueue, Depends(get_queue)], event_id: EventId
) -> ReplayQueuedBody:
    async with unit_of_work(sessions) as session:
        outcome = await inbox.replay(session, event_id)
    if outcome is inbox.Replay.UNKNOWN:
        raise NotFound("no such event")
    if outcome is inbox.Replay.NOT_DEAD:
        raise EventNotDead(event_id)
    # After the commit: the job must find the event revived. A failed enqueue is only
    # logged; the event is due now, so the sweeper's next pass enqueues it.
    queued = await inbox.enqueue_events(queue, [event_id]) == 1
    return ReplayQueuedBody(event_id=event_id, queued=queued)
