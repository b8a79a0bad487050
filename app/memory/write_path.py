"""The memory write path (seed 000, seven steps): Jev decides whether and which record,
the chat model only phrases the text, and every read and change lands in the ledger.

The per-user advisory lock is held around the read and around the apply transaction only,
never across a model call; a record that changed in between is skipped, not overwritten."""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from sqlalchemy.ext.asyncio import AsyncSession

from app.chat.base import ChatFailed, Purpose
from app.db import SessionFactory, unit_of_work
from app.decision.vocabulary import VERDICT_OPTIONS, YES_THRESHOLD, Question
from app.kit.clock import utcnow
from app.memory import ledger, repository
from app.memory.erasure import erased_since
from app.memory.exchange import Exchange
from app.memory.prompts import (
    VerdictLine,
    add_prompt,
    parse_written,
    verdict_prompt,
    worth_keeping_prompt,
    writer_request,
    writer_system,
)
from app.models.memory import Memory
from app.services import Services

logger = logging.getLogger(__name__)

WRITER_MAX_TOKENS = 300
ERASURE_MARGIN = timedelta(seconds=5)


@dataclass
class WriteOutcome:
    """What one run changed; ``stopped`` says why it ended early (None when it ran through)."""

    added: list[int] = field(default_factory=list)
    updated: list[int] = field(default_factory=list)
    deleted: list[int] = field(default_factory=list)
    discarded: list[str] = field(default_factory=list)
    skipped: list[int] = field(default_factory=list)
    stopped: str | None = None

    @property
    def changed(self) -> bool:
        return bool(self.added or self.updated or self.deleted)


@dataclass(frozen=True, slots=True)
class ReadRecord:
    """A memory as it was read: the apply step re-checks content and updated_at."""

    id: int
    content: str
    updated_at: datetime


@dataclass(frozen=True, slots=True)
class Plan:
    deletes: list[ReadRecord]
    updates: list[tuple[ReadRecord, str]]
    add: str | None
    add_reason: str


async def run_write_path(
    services: Services,
    exchange: Exchange,
    *,
    actor: str,
    run_id: int | None = None,
    trigger: str | None = None,
) -> WriteOutcome:
    """Run the seven steps for ``exchange.speaker_id``; the only profile it can touch."""
    if not exchange.usable:
        return WriteOutcome(stopped="unusable")
    # Words read before an erasure must not come back as a memory after it; the margin
    # covers the caller's read of the exchange just before this call.
    read_at = utcnow() - ERASURE_MARGIN
    speaker = exchange.speaker_id
    if trigger is not None and await _already_applied(services.sessions, speaker, trigger):
        return WriteOutcome(stopped="already_applied")
    worth = await services.decider.probability(
        Question.WORTH_KEEPING, worth_keeping_prompt(exchange)
    )
    if worth is None:
        return WriteOutcome(stopped="no_answer")
    if worth < YES_THRESHOLD:
        return WriteOutcome(stopped="not_worth_keeping")
    records = await _read(services.sessions, speaker, actor, run_id, trigger)
    verdicts = await asyncio.gather(*(_verdict(services, exchange, r) for r in records))
    add_reason = await _decide_add(services, exchange, records, verdicts)
    outcome = WriteOutcome()
    plan = await _write_texts(services, exchange, records, verdicts, add_reason, outcome)
    return await _apply(services.sessions, speaker, plan, outcome, actor, run_id, trigger, read_at)


async def _already_applied(sessions: SessionFactory, speaker: int, trigger: str) -> bool:
    async with sessions() as session:
        return await ledger.trigger_applied(session, user_id=speaker, trigger=trigger)


async def _read(
    sessions: SessionFactory, speaker: int, actor: str, run_id: int | None, trigger: str | None
) -> list[ReadRecord]:
    """Step 3: up to ten memories, newest first, read and logged under the user's lock."""
    async with unit_of_work(sessions) as session:
        await repository.lock_user(session, speaker)
        rows = await repository.recent_memories(session, speaker)
        await ledger.log_read(
            session,
            user_id=speaker,
            ids=[m.id for m in rows],
            actor=actor,
            reason="write path",
            run_id=run_id,
            trigger=trigger,
        )
        return [ReadRecord(m.id, m.content, m.updated_at) for m in rows]


async def _verdict(services: Services, exchange: Exchange, record: ReadRecord) -> str | None:
    """Step 4, one record: None (no answer) leaves it untouched."""
    return await services.decider.choice(
        Question.MEMORY_VERDICT, verdict_prompt(exchange, record.content), VERDICT_OPTIONS
    )


async def _decide_add(
    services: Services,
    exchange: Exchange,
    records: list[ReadRecord],
    verdicts: list[str | None],
) -> str | None:
    """Step 5: a first memory is allowed outright; otherwise Jev weighs it against the verdicts.

    Returns the ledger reason for the add, or None when there is no add."""
    if not records:
        return "first memory"
    lines = [VerdictLine(r.content, v) for r, v in zip(records, verdicts, strict=True)]
    p = await services.decider.probability(Question.ADD_MEMORY, add_prompt(exchange, lines))
    if p is None or p < YES_THRESHOLD:
        return None
    return f"add_memory p={p:.2f}"


async def _write_texts(
    services: Services,
    exchange: Exchange,
    records: list[ReadRecord],
    verdicts: list[str | None],
    add_reason: str | None,
    outcome: WriteOutcome,
) -> Plan:
    """Step 6: one writer call per update and for the add, concurrently."""
    to_update = [r for r, v in zip(records, verdicts, strict=True) if v == "update"]
    jobs = [_write(services, exchange, r.content) for r in to_update]
    if add_reason is not None:
        jobs.append(_write(services, exchange, None))
    texts = await asyncio.gather(*jobs)
    for text in texts:
        if isinstance(text, _Discarded):
            outcome.discarded.append(text.text)
    updates = [
        (r, t)
        for r, t in zip(to_update, texts, strict=False)
        if isinstance(t, str) and t != r.content
    ]
    add = texts[-1] if add_reason is not None and isinstance(texts[-1], str) else None
    deletes = [r for r, v in zip(records, verdicts, strict=True) if v == "delete"]
    return Plan(deletes, updates, add, add_reason or "")


@dataclass(frozen=True, slots=True)
class _Discarded:
    text: str


async def _write(
    services: Services, exchange: Exchange, rewriting: str | None
) -> str | _Discarded | None:
    """The writer sees the exchange and at most the one record it rewrites, nothing else."""
    try:
        raw = await services.chat.write(
            Purpose.MEMORY_TEXT,
            system=[writer_system(exchange.speaker_name)],
            messages=[{"role": "user", "content": writer_request(exchange, rewriting)}],
            max_tokens=WRITER_MAX_TOKENS,
        )
    except ChatFailed:
        logger.warning("memory writer failed", extra={"speaker_id": exchange.speaker_id})
        return None
    written = parse_written(raw)
    if written.usable:
        return written.fact
    # Never stored on anyone's profile: a third-party fact, an empty answer or garbage.
    logger.info(
        "memory text discarded",
        extra={"speaker_id": exchange.speaker_id, "subject": written.subject},
    )
    return _Discarded(written.fact) if written.fact else None


def _unchanged(current: Memory | None, record: ReadRecord) -> bool:
    return (
        current is not None
        and current.content == record.content
        and current.updated_at == record.updated_at
    )


async def _apply(
    sessions: SessionFactory,
    speaker: int,
    plan: Plan,
    outcome: WriteOutcome,
    actor: str,
    run_id: int | None,
    trigger: str | None,
    read_at: datetime,
) -> WriteOutcome:
    """Step 7: deletes, updates, then the add, each logged, in one locked transaction."""
    if not (plan.deletes or plan.updates or plan.add):
        return outcome
    async with unit_of_work(sessions) as session:
        await repository.lock_user(session, speaker)
        if trigger is not None and await ledger.trigger_applied(
            session, user_id=speaker, trigger=trigger
        ):
            outcome.stopped = "already_applied"
            return outcome
        if await erased_since(session, speaker, read_at):
            outcome.stopped = "erased"
            return outcome
        log = _Logger(session, speaker, actor, run_id, trigger)
        touched = [r.id for r in plan.deletes] + [r.id for r, _ in plan.updates]
        current = await repository.owned_for_update_many(session, touched, speaker)
        for record in plan.deletes:
            await _apply_delete(session, speaker, record, current.get(record.id), outcome, log)
        for record, text in plan.updates:
            await _apply_update(
                session, speaker, record, text, current.get(record.id), outcome, log
            )
        if plan.add is not None:
            memory = await repository.insert_memory(session, user_id=speaker, content=plan.add)
            await log("add", memory.id, plan.add_reason, None, ledger.snapshot(memory))
            outcome.added.append(memory.id)
    ledger.count_changes(actor, "delete", len(outcome.deleted))
    ledger.count_changes(actor, "update", len(outcome.updated))
    ledger.count_changes(actor, "add", len(outcome.added))
    return outcome


@dataclass(frozen=True, slots=True)
class _Logger:
    session: AsyncSession
    speaker: int
    actor: str
    run_id: int | None
    trigger: str | None

    async def __call__(
        self,
        action: str,
        memory_id: int,
        reason: str,
        before: dict[str, object] | None,
        after: dict[str, object] | None,
    ) -> None:
        await ledger.log_change(
            self.session,
            action=action,
            memory_id=memory_id,
            user_id=self.speaker,
            actor=self.actor,
            reason=reason,
            before=before,
            after=after,
            run_id=self.run_id,
            trigger=self.trigger,
        )


async def _apply_delete(
    session: AsyncSession,
    speaker: int,
    record: ReadRecord,
    current: Memory | None,
    outcome: WriteOutcome,
    log: _Logger,
) -> None:
    if not _unchanged(current, record):
        _skip(record, "delete", outcome)
        return
    assert current is not None
    before = ledger.snapshot(current)
    await repository.delete_owned(session, record.id, speaker)
    await log("delete", record.id, "memory_verdict: delete", before, None)
    outcome.deleted.append(record.id)


async def _apply_update(
    session: AsyncSession,
    speaker: int,
    record: ReadRecord,
    text: str,
    current: Memory | None,
    outcome: WriteOutcome,
    log: _Logger,
) -> None:
    if not _unchanged(current, record):
        _skip(record, "update", outcome)
        return
    assert current is not None
    before = ledger.snapshot(current)
    updated = await repository.rewrite_memory(session, record.id, text)
    await log("update", record.id, "memory_verdict: update", before, ledger.snapshot(updated))
    outcome.updated.append(record.id)


def _skip(record: ReadRecord, action: str, outcome: WriteOutcome) -> None:
    # Someone else (another run, a command) changed or removed it since our read: theirs wins.
    logger.info(
        "memory verdict skipped: record changed since read",
        extra={"memory_id": record.id, "verdict": action},
    )
    outcome.skipped.append(record.id)
