"""The nightly decay review: stale memories, oldest first, kept unless Jev says delete."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from app.db import unit_of_work
from app.decision.vocabulary import STALE_OPTIONS, Question
from app.memory import ledger, repository
from app.models.memory import Memory
from app.services import Services

logger = logging.getLogger(__name__)

STALE_AFTER = timedelta(days=30)
STALE_CAP = 20  # reviews per night: the cost bound
DECAY_REASON = "decay"


@dataclass
class DecayOutcome:
    deleted: list[int] = field(default_factory=list)
    kept: list[int] = field(default_factory=list)
    unanswered: list[int] = field(default_factory=list)
    skipped: list[int] = field(default_factory=list)


async def stale_memory_ids(
    session: AsyncSession, *, cutoff: datetime, limit: int = STALE_CAP
) -> list[int]:
    """Memories not updated since ``cutoff``, oldest first, at most ``limit``."""
    query = (
        select(Memory.id)
        .where(Memory.updated_at < cutoff)
        .order_by(Memory.updated_at, Memory.id)
        .limit(limit)
    )
    return list((await session.scalars(query)).all())


def stale_prompt(content: str, updated_at: datetime, now: datetime) -> str:
    days = max(0, (now - updated_at).days)
    return (
        "A note in a Discord member's long-term profile has not been updated for "
        f"{days} days.\n"
        f"Note: {content}\n\n"
        "Is it durable profile information worth keeping (keep), or a time-limited detail "
        "that no longer matters (delete)?"
    )


@dataclass(frozen=True, slots=True)
class _Stale:
    id: int
    user_id: int
    content: str
    updated_at: datetime


async def _load(services: Services, ids: Sequence[int], cutoff: datetime) -> list[_Stale]:
    async with services.sessions() as session:
        rows = await session.scalars(select(Memory).where(Memory.id.in_(ids)))
        found = {m.id: _Stale(m.id, m.user_id, m.content, m.updated_at) for m in rows}
    # Gone, or touched since the list was made: no longer stale, nothing to review.
    return [found[i] for i in ids if i in found and found[i].updated_at < cutoff]


async def review_stale(
    services: Services, ids: Sequence[int], *, run_id: int, cutoff: datetime, now: datetime
) -> DecayOutcome:
    """Ask ``stale_keep`` for each record; delete only on an explicit ``delete``."""
    outcome = DecayOutcome()
    records = await _load(services, ids, cutoff)
    outcome.skipped.extend(i for i in ids if i not in {r.id for r in records})
    answers = await asyncio.gather(
        *(
            services.decider.choice(
                Question.STALE_KEEP, stale_prompt(r.content, r.updated_at, now), STALE_OPTIONS
            )
            for r in records
        )
    )
    for record, answer in zip(records, answers, strict=True):
        if answer is None:
            outcome.unanswered.append(record.id)
        elif answer != "delete":
            outcome.kept.append(record.id)
        elif await _delete(services, record, run_id):
            outcome.deleted.append(record.id)
        else:
            outcome.skipped.append(record.id)
    return outcome


async def _delete(services: Services, record: _Stale, run_id: int) -> bool:
    """Delete under the owner's lock, only if the record is exactly what was reviewed."""
    async with unit_of_work(services.sessions) as session:
        await repository.lock_user(session, record.user_id)
        current = await repository.owned_for_update(session, record.id, record.user_id)
        if (
            current is None
            or current.content != record.content
            or current.updated_at != record.updated_at
        ):
            return False
        before = ledger.snapshot(current)
        await repository.delete_owned(session, record.id, record.user_id)
        await ledger.log_change(
            session,
            action="delete",
            memory_id=record.id,
            user_id=record.user_id,
            actor="nightly",
            reason=DECAY_REASON,
            before=before,
            after=None,
            run_id=run_id,
            trigger=f"nightly:{run_id}:decay:{record.id}",
        )
    ledger.count_changes("nightly", "delete")
    return True
