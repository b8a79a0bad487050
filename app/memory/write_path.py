"""The memory write path (seed 000, seven steps): Jev decides whether and which record,
the chat model only phrases the text, and every read and change lands in the ledger.

With relevance recall and an embeddings endpoint, the texts written in step 6 are embedded
(their vectors are stored with them), and an add is first checked for a repeat in other words:
the person's memories nearest in meaning, less those a deterministic rule tells apart (a
negation, a number, a name, a swapped value), are put to Jev (``same_memory``); a yes makes
the add an update of that memory, with the new text. No answer: a new row.

The per-user advisory lock is held around the read and around the apply transaction only,
never across a model call; a record that changed in between is skipped, not overwritten."""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta

from sqlalchemy.ext.asyncio import AsyncSession

from app.channel.exchange import Exchange, Place
from app.chat.base import ChatFailed, Purpose
from app.consent import store as consent
from app.db import SessionFactory, unit_of_work
from app.decision.vocabulary import VERDICT_OPTIONS, YES_THRESHOLD, Question
from app.embeddings.base import EmbeddingFailed
from app.kit import japanese
from app.kit.clock import utcnow
from app.kit.spend import paid_by
from app.kit.vectors import Embedding
from app.memory import store
from app.memory.duplicates import may_repeat
from app.memory.prompts import (
    VerdictLine,
    Written,
    add_prompt,
    parse_notes,
    parse_written,
    same_memory_prompt,
    verdict_prompt,
    worth_keeping_prompt,
    writer_request,
    writer_system,
)
from app.memory.recall import exchange_query
from app.memory.records import MemoryRecord, SourceMessage, Why
from app.privacy import store as register
from app.services import Services
from app.usage.budget import background_over_budget
from app.vocabulary import Actor

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
class Note:
    """A text the writer wrote, and the exchange's line numbers it said the fact came from."""

    text: str
    lines: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class Add:
    """A new note, the ledger reason for adding it, and the memory it repeats in other words
    (the add then updates that memory instead)."""

    note: Note
    reason: str
    repeats: MemoryRecord | None = None


@dataclass(frozen=True, slots=True)
class Plan:
    deletes: list[MemoryRecord]
    updates: list[tuple[MemoryRecord, Note]]
    adds: list[Add]
    vectors: dict[str, Embedding] = field(default_factory=dict)  # the written texts'


async def run_write_path(
    services: Services,
    exchange: Exchange,
    *,
    actor: Actor,
    run_id: int | None = None,
    trigger: str | None = None,
) -> WriteOutcome:
    """Run the seven steps for ``exchange.speaker_id``; the only profile it can touch. Its
    model calls are the speaker's, in the place the exchange was said, and it does not start
    once the speaker's or that guild's daily token budget is spent."""
    if not exchange.usable:
        return WriteOutcome(stopped="unusable")
    place = exchange.place
    guild_id = place.guild_id if place is not None else None
    if await background_over_budget(services, guild_id=guild_id, people=[exchange.speaker_id]):
        return WriteOutcome(stopped="over_budget")  # nothing asked: the day's budget is spent
    with paid_by(guild_id, exchange.speaker_id):
        return await _write_path(services, exchange, actor=actor, run_id=run_id, trigger=trigger)


async def _write_path(
    services: Services,
    exchange: Exchange,
    *,
    actor: Actor,
    run_id: int | None,
    trigger: str | None,
) -> WriteOutcome:
    # Words read before an erasure must not come back as a memory after it; the margin
    # covers the caller's read of the exchange just before this call.
    read_at = utcnow() - ERASURE_MARGIN
    speaker = exchange.speaker_id
    if trigger is not None and await _already_applied(services.sessions, speaker, trigger):
        return WriteOutcome(stopped="already_applied")
    # Consent: nothing new is learned about a paused person (or one being erased), not even
    # whether it is worth it.
    if await _paused(services.sessions, speaker, read_at):
        return WriteOutcome(stopped="paused")
    worth = await services.decider.probability(
        Question.WORTH_KEEPING, worth_keeping_prompt(exchange)
    )
    if worth is None:
        return WriteOutcome(stopped="no_answer")
    if worth < YES_THRESHOLD:
        return WriteOutcome(stopped="not_worth_keeping")
    why = Why(actor=actor, run_id=run_id, trigger=trigger)
    relevant = services.settings.recall_relevant
    records = await _read(services.sessions, exchange, why, relevant=relevant)
    verdicts = await asyncio.gather(*(_verdict(services, exchange, r) for r in records))
    add_reason = await _decide_add(services, exchange, records, verdicts)
    outcome = WriteOutcome()
    plan = await _write_texts(services, exchange, records, verdicts, add_reason, outcome)
    if relevant and services.embedder is not None:
        plan = await _repeat_check(services, exchange, await _embedded(services, plan), why)
    return await _apply(services.sessions, exchange, plan, outcome, why, read_at, distinct=relevant)


async def _already_applied(sessions: SessionFactory, speaker: int, trigger: str) -> bool:
    async with sessions() as session:
        return await store.trigger_applied(session, user_id=speaker, trigger=trigger)


async def _paused(sessions: SessionFactory, speaker: int, since: datetime) -> bool:
    async with sessions() as session, session.begin():
        if await register.blocked(session, [speaker], since=since):
            return True
        return await consent.paused_since(session, speaker) is not None


async def _read(
    sessions: SessionFactory, exchange: Exchange, why: Why, *, relevant: bool
) -> list[MemoryRecord]:
    """Step 3: up to ten memories, read and logged under the user's lock: the newest, or
    (MEMORY_RECALL=relevant) the ones most relevant to the exchange, so the verdicts see an
    old memory that it repeats or contradicts.

    Only memories that may surface where the exchange happened: a conversation in one
    guild never rewrites (or deletes) what the person said in a DM or another guild."""
    read = replace(why, reason="write path")
    speaker, place = exchange.speaker_id, exchange.place
    async with unit_of_work(sessions) as session:
        if relevant:
            query = exchange_query(exchange)
            return await store.relevant(session, speaker, read, query=query, place=place)
        return await store.recent(session, speaker, read, place=place)


async def _verdict(services: Services, exchange: Exchange, record: MemoryRecord) -> str | None:
    """Step 4, one record: None (no answer) leaves it untouched."""
    return await services.decider.choice(
        Question.MEMORY_VERDICT, verdict_prompt(exchange, record.content), VERDICT_OPTIONS
    )


async def _decide_add(
    services: Services,
    exchange: Exchange,
    records: list[MemoryRecord],
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
    records: list[MemoryRecord],
    verdicts: list[str | None],
    add_reason: str | None,
    outcome: WriteOutcome,
) -> Plan:
    """Step 6: one writer call per update and for the adds, concurrently. The add's call may
    give several notes (one per fact stated); one that a kept or rewritten memory already
    says word for word is dropped."""
    to_update = [r for r, v in zip(records, verdicts, strict=True) if v == "update"]
    jobs = [_write(services, exchange, r.content) for r in to_update]
    if add_reason is not None:
        jobs.append(_write(services, exchange, None))
    answers = await asyncio.gather(*jobs)
    for answer in answers:
        outcome.discarded.extend(n.text for n in answer if isinstance(n, _Discarded))
    written = [[n for n in answer if isinstance(n, Note)] for answer in answers]
    updates = [
        (r, notes[0])
        for r, notes in zip(to_update, written, strict=False)
        if notes and notes[0].text != r.content
    ]
    kept = {_plain(r.content) for r, v in zip(records, verdicts, strict=True) if v != "delete"}
    kept |= {_plain(n.text) for _, n in updates}
    new = {n.text: n for n in written[-1]} if add_reason is not None else {}
    adds = [Add(n, add_reason or "") for n in new.values() if _plain(n.text) not in kept]
    deletes = [r for r, v in zip(records, verdicts, strict=True) if v == "delete"]
    return Plan(deletes, updates, adds)


def _plain(text: str) -> str:
    return text.strip().rstrip(".。").casefold()


@dataclass(frozen=True, slots=True)
class _Discarded:
    text: str


async def _write(
    services: Services, exchange: Exchange, rewriting: str | None
) -> list[Note | _Discarded]:
    """The writer sees the exchange and at most the one record it rewrites, nothing else: a
    rewrite gives one note, an add one per fact (none when the call fails)."""
    try:
        raw = await services.chat.write(
            Purpose.MEMORY_TEXT,
            system=[writer_system(exchange)],
            messages=[{"role": "user", "content": writer_request(exchange, rewriting)}],
            max_tokens=WRITER_MAX_TOKENS,
        )
    except ChatFailed:
        logger.warning("memory writer failed", extra={"speaker_id": exchange.speaker_id})
        return []
    notes = [parse_written(raw)] if rewriting is not None else parse_notes(raw)
    return [kept for written in notes if (kept := _kept(exchange, written)) is not None]


def _kept(exchange: Exchange, written: Written) -> Note | _Discarded | None:
    if written.usable:
        return Note(written.fact, written.lines)
    # Never stored on anyone's profile: a third-party fact, an empty answer or garbage.
    logger.info(
        "memory text discarded",
        extra={"speaker_id": exchange.speaker_id, "subject": written.subject},
    )
    return _Discarded(written.fact) if written.fact else None


async def _embedded(services: Services, plan: Plan) -> Plan:
    """The texts to write, embedded in one request (stored with them); without the service,
    none (the back-fill gives them theirs later, and the repeat check goes by words)."""
    assert services.embedder is not None
    written = [n.text for _, n in plan.updates] + [a.note.text for a in plan.adds]
    texts = list(dict.fromkeys(written))
    if not texts:
        return plan
    try:
        vectors = await services.embedder.documents(texts)
    except EmbeddingFailed as exc:
        logger.warning("memory texts not embedded", extra={"failure": exc.failure})
        return plan
    return replace(plan, vectors=dict(zip(texts, vectors, strict=True)))


async def _repeat_check(services: Services, exchange: Exchange, plan: Plan, why: Why) -> Plan:
    """Step 6b, for each add: does it repeat a memory in other words?"""
    adds = [_repeat_of(services, exchange, add, plan.vectors, why) for add in plan.adds]
    return replace(plan, adds=list(await asyncio.gather(*adds)))


async def _repeat_of(
    services: Services, exchange: Exchange, add: Add, vectors: dict[str, Embedding], why: Why
) -> Add:
    """The add's nearest memories by meaning that no telling difference sets apart are put
    to Jev, nearest first; the first yes is the memory the add updates instead. Read (and
    logged) outside the person's lock."""
    text = add.note.text
    vector = vectors.get(text)
    if vector is None:
        return add
    read = replace(why, reason="repeat check")
    async with unit_of_work(services.sessions) as session:
        near = await store.near_repeats(
            session, exchange.speaker_id, read, text, vector, place=exchange.place
        )
    if any(japanese.has_japanese(t) for t in (text, *(n.record.content for n in near))):
        await asyncio.to_thread(japanese.load)  # the dictionary, once, off the event loop
    candidates = [n for i, n in enumerate(near) if _may_repeat(n, text, nearest=i == 0)]
    answers = await asyncio.gather(
        *(
            services.decider.boolean(
                Question.SAME_MEMORY, same_memory_prompt(exchange, n.record.content, text)
            )
            for n in candidates
        )
    )
    for near_one, same in zip(candidates, answers, strict=True):
        if same is True:
            record = near_one.record
            reason = (
                f"same_memory: repeats memory {record.id} in other words "
                f"({near_one.similarity:.2f})"
            )
            return replace(add, repeats=record, reason=reason)
    return add


def _may_repeat(near: store.Near, text: str, *, nearest: bool) -> bool:
    return may_repeat(
        near.record.content,
        text,
        overlap=near.overlap,
        standing=near.standing,
        nearest=nearest,
    )


def _sources(exchange: Exchange, note: Note) -> list[SourceMessage]:
    """The messages ``note`` was learned from: the speaker's lines its writer named, checked
    against the exchange (none named: the triggering message)."""
    guild = exchange.place.guild_id if exchange.place is not None else None
    return [SourceMessage(m, c, guild) for m, c in exchange.learned_from(note.lines)]


async def _apply(
    sessions: SessionFactory,
    exchange: Exchange,
    plan: Plan,
    outcome: WriteOutcome,
    why: Why,
    read_at: datetime,
    *,
    distinct: bool = False,
) -> WriteOutcome:
    """Step 7: deletes, updates, then the add, each logged, in one locked transaction.

    A record that changed since it was read is skipped: the later change wins. With
    ``distinct`` (MEMORY_RECALL=relevant) no update or add may leave two memories saying
    the same: the near-duplicate check sends it to the memory that already says it."""
    if not (plan.deletes or plan.updates or plan.adds):
        return outcome
    speaker, place = exchange.speaker_id, exchange.place
    async with unit_of_work(sessions) as session:
        # The erasure guard first (the one lock order), then the person's memory lock.
        if await register.blocked(session, [speaker], since=read_at):
            outcome.stopped = "erased"
            return outcome
        await store.lock_owners(session, [speaker])
        if why.trigger is not None and await store.trigger_applied(
            session, user_id=speaker, trigger=why.trigger
        ):
            outcome.stopped = "already_applied"
            return outcome
        if await consent.paused_since(session, speaker) is not None:
            outcome.stopped = "paused"  # paused while the models were being asked
            return outcome
        for record in plan.deletes:
            verdict = replace(why, reason="memory_verdict: delete")
            gone = await store.delete_one(session, record.id, verdict, expected=record)
            _settle(record, "delete", gone is not None, outcome.deleted, outcome)

        def applying(note: Note) -> _Applying:
            sources = _sources(exchange, note)
            return _Applying(session, place, sources, outcome, distinct, plan.vectors)

        for record, note in plan.updates:
            update_why = replace(why, reason="memory_verdict: update")
            await _update(applying(note), record, note.text, update_why)
        for add in plan.adds:
            to = applying(add.note)
            add_why, text = replace(why, reason=add.reason), add.note.text
            if add.repeats is None or not await _repeat(to, add.repeats, text, add_why):
                await _add(to, speaker, text, add_why)
    return outcome


@dataclass(frozen=True, slots=True)
class _Applying:
    """Where one of step 7's changes goes: the locked transaction, the place the exchange
    happened, the messages the note was learned from, the outcome being filled in, and
    whether the near-duplicate check applies (MEMORY_RECALL=relevant)."""

    session: AsyncSession
    place: Place | None
    sources: list[SourceMessage]
    outcome: WriteOutcome
    distinct: bool
    vectors: dict[str, Embedding] = field(default_factory=dict)


async def _repeat(to: _Applying, repeated: MemoryRecord, text: str, why: Why) -> bool:
    """The add as an update of the memory it repeats (with the new text), if that memory is
    still as it was read; False sends it down the plain add."""
    done = await store.rewrite(
        to.session,
        repeated,
        text,
        why,
        learned_in=to.place,
        sources=to.sources,
        embedding=to.vectors.get(text),
    )
    if done is not None:
        to.outcome.updated.append(done.id)
    return done is not None


async def _update(to: _Applying, record: MemoryRecord, text: str, why: Why) -> None:
    if not to.distinct:
        done = await store.rewrite(
            to.session, record, text, why, learned_in=to.place, sources=to.sources
        )
        _settle(record, "update", done is not None, to.outcome.updated, to.outcome)
        return
    written = await store.rewrite_distinct(
        to.session,
        record,
        text,
        why,
        learned_in=to.place,
        sources=to.sources,
        embedding=to.vectors.get(text),
    )
    if written is None:
        _settle(record, "update", False, to.outcome.updated, to.outcome)
        return
    to.outcome.updated.append(written.record.id)
    if written.folded is not None:
        to.outcome.deleted.append(written.folded.id)


async def _add(to: _Applying, speaker: int, text: str, why: Why) -> None:
    if not to.distinct:
        added = await store.add(
            to.session, speaker, text, why, learned_in=to.place, sources=to.sources
        )
        to.outcome.added.append(added.id)
        return
    written = await store.add_distinct(
        to.session,
        speaker,
        text,
        why,
        learned_in=to.place,
        sources=to.sources,
        embedding=to.vectors.get(text),
    )
    done = to.outcome.added if written.duplicate is None else to.outcome.updated
    done.append(written.record.id)


def _settle(
    record: MemoryRecord, verdict: str, applied: bool, done: list[int], outcome: WriteOutcome
) -> None:
    if applied:
        done.append(record.id)
        return
    # Someone else (another run, a command) changed or removed it since our read: theirs wins.
    logger.info(
        "memory verdict skipped: record changed since read",
        extra={"memory_id": record.id, "verdict": verdict},
    )
    outcome.skipped.append(record.id)
