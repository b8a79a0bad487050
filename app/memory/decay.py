"""The nightly decay review (seed 000 "Decay"): stale memories, kept unless Jev explicitly
says delete. A night takes the stale memories least recently reviewed first (then the
oldest), so every stale memory is reviewed before any is reviewed twice; twenty a night.
Reading a record to send it to Jev is a logged read."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from app.db import unit_of_work
from app.decision.vocabulary import STALE_OPTIONS, Question
from app.kit.spend import paid_by
from app.memory import store
from app.memory.records import MemoryRecord, Why
from app.services import Services
from app.vocabulary import Actor

logger = logging.getLogger(__name__)

STALE_AFTER = timedelta(days=30)
STALE_CAP = 20  # reviews per night: the cost bound
DECAY_REASON = "decay"
ACTOR = Actor.NIGHTLY


@dataclass
class DecayOutcome:
    deleted: list[int] = field(default_factory=list)
    kept: list[int] = field(default_factory=list)
    unanswered: list[int] = field(default_factory=list)
    skipped: list[int] = field(default_factory=list)


def stale_prompt(content: str, updated_at: datetime | None, now: datetime) -> str:
    days = max(0, (now - updated_at).days) if updated_at is not None else 0
    return (
        "A note in a Discord member's long-term profile has not been updated for "
        f"{days} days.\n"
        f"Note: {content}\n\n"
        "Is it durable profile information worth keeping (keep), or a time-limited detail "
        "that no longer matters (delete)?"
    )


async def _load(
    services: Services, ids: Sequence[int], cutoff: datetime, run_id: int
) -> list[MemoryRecord]:
    """The records to review, read (and logged) for the decay review."""
    why = Why(ACTOR, "decay review", run_id=run_id)
    async with unit_of_work(services.sessions) as session:
        records = await store.by_ids(session, ids, why)
    # Touched since the list was made: no longer stale, nothing to review.
    return [r for r in records if r.updated_at is not None and r.updated_at < cutoff]


async def review_stale(
    services: Services, ids: Sequence[int], *, run_id: int, cutoff: datetime, now: datetime
) -> DecayOutcome:
    """Ask ``stale_keep`` for each record; delete only on an explicit ``delete``."""
    outcome = DecayOutcome()
    records = await _load(services, ids, cutoff, run_id)
    outcome.skipped.extend(i for i in ids if i not in {r.id for r in records})
    answers = await asyncio.gather(*(_stale_keep(services, r, now) for r in records))
    for record, answer in zip(records, answers, strict=True):
        if answer is None:
            outcome.unanswered.append(record.id)
        elif answer != "delete":
            outcome.kept.append(record.id)
        elif await _delete(services, record, run_id):
            outcome.deleted.append(record.id)
        else:
            outcome.skipped.append(record.id)
    # Kept and unanswered ones wait behind every stale memory not yet reviewed.
    async with unit_of_work(services.sessions) as session:
        await store.mark_reviewed(session, [*outcome.kept, *outcome.unanswered])
    return outcome


async def _stale_keep(services: Services, record: MemoryRecord, now: datetime) -> str | None:
    """The review of one memory, paid for by its owner (in the guild it was learned in)."""
    with paid_by(record.origin.guild_id, record.user_id):
        return await services.decider.choice(
            Question.STALE_KEEP, stale_prompt(record.content, record.updated_at, now), STALE_OPTIONS
        )


async def _delete(services: Services, record: MemoryRecord, run_id: int) -> bool:
    """Delete under the owner's lock, only if the record is exactly what was reviewed."""
    why = Why(ACTOR, DECAY_REASON, run_id=run_id, trigger=f"nightly:{run_id}:decay:{record.id}")
    async with unit_of_work(services.sessions) as session:
        gone = await store.delete_one(session, record.id, why, expected=record)
    return gone is not None
