"""The memory store: the one owner of `memories` and `memory_log`.

Every read and change of a person's memories goes through here. Each operation takes the
owner's lock, writes its ledger row (actor, reason, run, trigger, and before/after in the
one JSON codec below) and returns what it read or changed. Change metrics are counted when
the transaction commits, so a change that is rolled back never counts."""

from __future__ import annotations

import json
from collections import Counter as Tally
from collections.abc import AsyncIterator, Callable, Collection, Iterable, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from functools import lru_cache
from typing import Any

from prometheus_client import Counter
from sqlalchemy import (
    Date,
    Select,
    Text,
    any_,
    cast,
    delete,
    event,
    exists,
    func,
    insert,
    literal,
    or_,
    select,
    text,
    tuple_,
    union_all,
    update,
)
from sqlalchemy.dialects.postgresql import ARRAY, JSONB, aggregate_order_by
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.engine import Dialect, Row
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm import Session

from app.channel.exchange import Place
from app.kit.locks import lock_key
from app.kit.relevance import Query, Ranking, SearchTable, ranked, term_weights
from app.kit.sql import any_array, bump_identity, mention_pattern
from app.kit.tokens import tokenize
from app.memory.duplicates import Duplicate, find_duplicate
from app.memory.records import (
    REDACTED,
    Forgetting,
    Forgotten,
    LedgerRow,
    LogEntry,
    MemoryRecord,
    Origin,
    Provenance,
    ReadCount,
    SourceMessage,
    Why,
    encode,
)
from app.models.memory import (
    FED_A_REPLY,
    ROLLUP_CANDIDATES,
    Memory,
    MemoryLog,
    MemoryReadCount,
    MemorySource,
)
from app.vocabulary import FORGOT_MEMORY, FORGOT_PERSON, UNDOABLE, Action, Actor

LOCK_NAMESPACE = "memory-user"
RECENT_LIMIT = 10
SEARCH_LIMIT = 10
# The ranked reads (MEMORY_RECALL=relevant, `!memory search`, the near-duplicate check).
MEMORIES = SearchTable("memories", "updated_at", "user_id")
# Chosen on bench/recall.py's tuning half (`--tune`): idf squared, the shipped prior; the
# sample and probes bound the cost for a profile of 10⁴ (bench/recall.py, "scale").
RANKING = Ranking(idf_power=2.0, sample=300, probe_rows=25)
MATCHES = replace(RANKING, min_score=1e-9)  # only rows that share a word with the query
DUPLICATE_CANDIDATES = 5

MEMORY_CHANGES = Counter(
    "memory_changes_total",
    "Memory rows added, updated, deleted or rolled back, by actor and action.",
    ["actor", "action"],
)


def _record(row: Memory | Row[Any]) -> MemoryRecord:
    origin = Origin(row.origin, row.origin_guild_id)
    return MemoryRecord(
        row.id, row.user_id, row.content, row.source, row.created_at, row.updated_at, origin
    )


def _origin_values(origin: Origin) -> dict[str, Any]:
    return {"origin": origin.kind, "origin_guild_id": origin.guild_id}


# --- locks and the commit-time metrics ----------------------------------------------------


_LOCK_ALL = text("SELECT pg_advisory_xact_lock(k) FROM unnest(CAST(:keys AS bigint[])) AS k")


async def lock_owners(session: AsyncSession, user_ids: Iterable[int]) -> None:
    """Serialise memory work per person until this transaction ends. Locks are taken in
    one fixed order (so two multi-person operations cannot deadlock) and once each."""
    held: set[int] = session.info.setdefault("memory_locks", set())
    wanted = sorted(set(user_ids) - held)
    if not wanted:
        return
    # unnest keeps the array's order, so the locks are taken in this (sorted) order.
    keys = sorted(lock_key(LOCK_NAMESPACE, user_id) for user_id in wanted)
    await session.execute(_LOCK_ALL, {"keys": keys})
    held.update(wanted)


def _count(session: AsyncSession, actor: Actor, action: Action, n: int = 1) -> None:
    pending: Tally[tuple[str, str]] = session.info.setdefault("memory_changes", Tally())
    pending[(actor, action)] += n


@event.listens_for(Session, "after_commit")
def _after_commit(session: Session) -> None:
    for (actor, action), n in session.info.pop("memory_changes", Tally()).items():
        if n > 0:
            MEMORY_CHANGES.labels(actor=actor, action=action).inc(n)
    session.info.pop("memory_locks", None)


@event.listens_for(Session, "after_rollback")
def _after_rollback(session: Session) -> None:
    session.info.pop("memory_changes", None)
    session.info.pop("memory_locks", None)


# --- the ledger rows ------------------------------------------------------------------------


async def _log(
    session: AsyncSession,
    why: Why,
    action: Action,
    user_id: int,
    memory_id: int | None,
    before: Any,
    after: Any,
) -> None:
    await session.execute(
        insert(MemoryLog).values(
            memory_id=memory_id,
            user_id=user_id,
            actor=why.actor,
            action=action,
            reason=why.reason,
            before=before,
            after=after,
            run_id=why.run_id,
            trigger=why.trigger,
        )
    )
    if action is not Action.READ:
        _count(session, why.actor, action)


async def _log_read(
    session: AsyncSession, why: Why, user_id: int, records: Sequence[MemoryRecord]
) -> None:
    """One row per read, even an empty one: memory_id null, `after` the ids read."""
    ids = [record.id for record in records]
    await _log(session, why, Action.READ, user_id, None, None, ids)


# --- reads (each one logged) ----------------------------------------------------------------


def _visible_in(place: Place | None) -> Any:
    """The rows an origin lets surface in ``place`` (None: everywhere, e.g. the owner's own
    listing). In a DM with the owner every memory may surface; in a guild only memories
    learned in that guild (and rows written by hand, which have no origin)."""
    if place is None or place.is_dm:
        return True
    return (Memory.origin == "any") | (
        (Memory.origin == "guild") & (Memory.origin_guild_id == place.guild_id)
    )


def _newest_first(user_id: int, place: Place | None = None) -> Any:
    return (
        select(Memory)
        .where(Memory.user_id == user_id, _visible_in(place))
        .order_by(Memory.updated_at.desc(), Memory.id.desc())
    )


async def recent(
    session: AsyncSession,
    user_id: int,
    why: Why,
    *,
    limit: int | None = RECENT_LIMIT,
    place: Place | None = None,
) -> list[MemoryRecord]:
    """Up to ``limit`` (None: all) of the person's memories that may surface in ``place``,
    most recently updated first."""
    await lock_owners(session, [user_id])
    query = _newest_first(user_id, place)
    rows = await session.scalars(query.limit(limit) if limit is not None else query)
    records = [_record(row) for row in rows]
    await _log_read(session, why, user_id, records)
    return records


def _visible_sql(session: AsyncSession, place: Place | None) -> str:
    """The same origin rule as ``_visible_in``, as SQL text for the ranked statement."""
    return _compiled_visibility(place, session.get_bind().dialect)


@lru_cache(maxsize=1024)
def _compiled_visibility(place: Place | None, dialect: Dialect) -> str:
    clause = _visible_in(place)
    if clause is True:
        return "TRUE"
    compiled = clause.compile(dialect=dialect, compile_kwargs={"literal_binds": True})
    return f"({compiled})"


async def _ranked(
    session: AsyncSession,
    user_id: int,
    query: Query,
    place: Place | None,
    limit: int,
    ranking: Ranking = RANKING,
) -> list[MemoryRecord]:
    """The best ``limit`` memories for ``query`` among those that may surface in ``place``,
    best first (not logged: the callers log what they hand out)."""
    found = await ranked(
        session,
        MEMORIES,
        Memory,
        where=_visible_sql(session, place),
        bind={},
        scope_id=user_id,
        query=query,
        ranking=ranking,
        limit=limit,
    )
    return [_record(row) for row, _ in found]


async def relevant(
    session: AsyncSession,
    user_id: int,
    why: Why,
    *,
    query: Query,
    place: Place | None = None,
    limit: int = RECENT_LIMIT,
    ranking: Ranking = RANKING,
) -> list[MemoryRecord]:
    """Up to ``limit`` of the person's memories that may surface in ``place``, chosen by
    relevance to ``query`` (newer first among equals; the newest when nothing is relevant)
    and listed newest first like ``recent``, so a profile of ``limit`` or fewer reads the
    same either way. One logged read. (``ranking``: the shipped parameters; the benchmark
    tries others on its tuning half.)"""
    if query.empty:
        return await recent(session, user_id, why, limit=limit, place=place)
    await lock_owners(session, [user_id])
    chosen = await _ranked(session, user_id, query, place, limit, ranking)
    records = sorted(chosen, key=lambda r: (r.updated_at, r.id), reverse=True)
    await _log_read(session, why, user_id, records)
    return records


async def search(
    session: AsyncSession, user_id: int, why: Why, query: Query, *, limit: int = SEARCH_LIMIT
) -> list[MemoryRecord]:
    """All of the person's memories (their own search, wherever they ask) that share a word
    with ``query``, best first as ``relevant`` ranks them, at most ``limit``. One logged
    read, even an empty one."""
    await lock_owners(session, [user_id])
    found = [] if query.empty else await _ranked(session, user_id, query, None, limit, MATCHES)
    await _log_read(session, why, user_id, found)
    return found


async def _duplicate_of(
    session: AsyncSession, user_id: int, content: str, place: Place | None, exclude: int | None
) -> Duplicate | None:
    """The memory visible in ``place`` that ``content`` repeats (app/memory/duplicates.py),
    among the few that match it best; the owner's lock is held."""
    query = Query.of([(content, 1.0)])
    if query.empty:
        return None
    near = await _ranked(session, user_id, query, place, DUPLICATE_CANDIDATES + 1, MATCHES)
    candidates = [(r.id, r.content) for r in near if r.id != exclude][:DUPLICATE_CANDIDATES]
    if not candidates:
        return None
    words = {*query.terms, *(t for _, text in candidates for t in tokenize(text))}
    weight = await term_weights(
        session,
        MEMORIES,
        where=_visible_sql(session, place),
        scope_id=user_id,
        terms=words,
        ranking=RANKING,
    )
    return find_duplicate(content, candidates, weight)


async def count(session: AsyncSession, user_id: int, *, place: Place | None = None) -> int:
    """How many of the person's memories may surface in ``place`` (a number, not a read)."""
    total = await session.scalar(
        select(func.count()).where(Memory.user_id == user_id, _visible_in(place))
    )
    return int(total or 0)


async def get(
    session: AsyncSession, memory_id: int, why: Why, *, owner: int | None = None
) -> MemoryRecord | None:
    """One memory (only ``owner``'s when given), its read logged under its owner."""
    row = await session.get(Memory, memory_id, populate_existing=True)
    if row is None or (owner is not None and row.user_id != owner):
        return None
    record = _record(row)
    await _log_read(session, why, record.user_id, [record])
    return record


async def sources_of(
    session: AsyncSession, memory_ids: Collection[int]
) -> dict[int, list[SourceMessage]]:
    """The messages each memory was learned from, oldest first (ids, no text)."""
    if not memory_ids:
        return {}
    rows = await session.scalars(
        select(MemorySource)
        .where(MemorySource.memory_id == any_array(memory_ids))
        .order_by(MemorySource.id)
    )
    found: dict[int, list[SourceMessage]] = {}
    for row in rows:
        found.setdefault(row.memory_id, []).append(
            SourceMessage(row.message_id, row.channel_id, row.guild_id, row.trigger, row.created_at)
        )
    return found


def _ledger_row(row: MemoryLog | Row[Any]) -> LedgerRow:
    return LedgerRow(
        id=row.id,
        memory_id=row.memory_id,
        user_id=row.user_id,
        actor=row.actor,
        action=row.action,
        reason=row.reason,
        before=row.before,
        after=row.after,
        run_id=row.run_id,
        created_at=row.created_at,
    )


async def history(
    session: AsyncSession,
    why: Why,
    *,
    user_id: int,
    memory_id: int | None = None,
    limit: int | None = None,
    before_id: int | None = None,
    hide_reads_by: Collection[str] = (),
) -> list[LedgerRow]:
    """The person's ledger rows (or one memory's), newest first, paged by id, without the
    reads of the actors in ``hide_reads_by``. Reading the ledger is itself a logged read of
    that person's profile."""
    query = select(MemoryLog).where(MemoryLog.user_id == user_id)
    if hide_reads_by:
        hidden = MemoryLog.actor.in_(list(hide_reads_by)) & (MemoryLog.action == Action.READ)
        query = query.where(~hidden)
    if memory_id is not None:
        query = query.where(MemoryLog.memory_id == memory_id)
    if before_id is not None:
        query = query.where(MemoryLog.id < before_id)
    query = query.order_by(MemoryLog.id.desc())
    found = await session.scalars(query.limit(limit) if limit is not None else query)
    rows = [_ledger_row(row) for row in found]
    ids = [memory_id] if memory_id is not None else []
    await _log(session, why, Action.READ, user_id, None, None, ids)
    return rows


async def by_ids(session: AsyncSession, ids: Sequence[int], why: Why) -> list[MemoryRecord]:
    """These memories (the ones that still exist), in the order given; one logged read per
    owner whose memories are returned."""
    if not ids:
        return []
    owners = await session.scalars(select(Memory.user_id).where(Memory.id.in_(ids)).distinct())
    await lock_owners(session, owners)
    rows = {row.id: _record(row) for row in await session.scalars(_fresh(Memory.id.in_(ids)))}
    records = [rows[i] for i in ids if i in rows]
    for user_id in sorted({record.user_id for record in records}):
        await _log_read(session, why, user_id, [r for r in records if r.user_id == user_id])
    return records


def _fresh(*where: Any) -> Any:
    return select(Memory).where(*where).execution_options(populate_existing=True)


async def stale_ids(session: AsyncSession, *, cutoff: datetime, limit: int) -> list[int]:
    """Ids of memories not updated since ``cutoff``, oldest first (ids only: reading their
    text is ``by_ids``, which logs it)."""
    # Never-reviewed first, then the least recently reviewed: every stale memory is reviewed
    # before any is reviewed twice.
    query = (
        select(Memory.id)
        .where(Memory.updated_at < cutoff)
        .order_by(Memory.reviewed_at.asc().nulls_first(), Memory.updated_at, Memory.id)
        .limit(limit)
    )
    return list((await session.scalars(query)).all())


async def provenance(
    session: AsyncSession, memory_id: int, why: Why, *, owner: int | None = None
) -> Provenance | None:
    """One memory (only ``owner``'s when given), its sources and its ledger changes; one
    logged read. None for a memory that does not exist or is not ``owner``'s."""
    row = await session.get(Memory, memory_id, populate_existing=True)
    if row is None or (owner is not None and row.user_id != owner):
        return None
    record = _record(row)
    sources = (await sources_of(session, [memory_id])).get(memory_id, [])
    logged = await session.scalars(
        select(MemoryLog)
        .where(MemoryLog.memory_id == memory_id, MemoryLog.action != Action.READ)
        .order_by(MemoryLog.id)
    )
    await _log_read(session, why, record.user_id, [record])
    return Provenance(record, sources, [_ledger_row(r) for r in logged])


# --- the whole profile, a page at a time (exports and full listings) -----------------------

# Rows per page of a paged read: what one page holds in memory, whatever the profile's size.
PAGE = 500


async def read_everything(session: AsyncSession, user_id: int, why: Why) -> int:
    """One logged read of all the person's memories, under their lock (so the pages that
    follow in this transaction see exactly these): Postgres lists the ids into the ledger row,
    so they are never all held here. How many memories it read."""
    await lock_owners(session, [user_id])
    listed = (
        select(
            func.coalesce(
                func.jsonb_agg(
                    aggregate_order_by(Memory.id, Memory.updated_at.desc(), Memory.id.desc())
                ),
                literal([], JSONB),
            )
        )
        .where(Memory.user_id == user_id)
        .scalar_subquery()
    )
    read = await session.scalar(
        insert(MemoryLog)
        .values(
            user_id=user_id,
            actor=why.actor,
            action=Action.READ,
            reason=why.reason,
            after=listed,
            run_id=why.run_id,
            trigger=why.trigger,
        )
        .returning(func.jsonb_array_length(MemoryLog.after))
    )
    return int(read or 0)


async def _pages(
    session: AsyncSession, query: Select[Any], *, size: int, after: Callable[[Row[Any]], Any]
) -> AsyncIterator[list[Row[Any]]]:
    """``query``'s rows, ``size`` at a time; ``after(last row)`` selects the next page's
    (keyset pagination: never an offset, every page one index range)."""
    page = list(await session.execute(query.limit(size)))
    while page:
        yield page
        if len(page) < size:
            return
        page = list(await session.execute(query.where(after(page[-1])).limit(size)))


_MEMORY_COLUMNS = (
    Memory.id,
    Memory.user_id,
    Memory.content,
    Memory.source,
    Memory.created_at,
    Memory.updated_at,
    Memory.origin,
    Memory.origin_guild_id,
)
_LOG_COLUMNS = (
    MemoryLog.id,
    MemoryLog.memory_id,
    MemoryLog.user_id,
    MemoryLog.actor,
    MemoryLog.action,
    MemoryLog.reason,
    MemoryLog.before,
    MemoryLog.after,
    MemoryLog.run_id,
    MemoryLog.created_at,
)


async def memory_pages(
    session: AsyncSession, user_id: int, *, size: int = PAGE
) -> AsyncIterator[list[MemoryRecord]]:
    """The person's memories, most recently updated first, ``size`` at a time. Not a read
    of its own: call it after ``read_everything``."""
    query = (
        select(*_MEMORY_COLUMNS)
        .where(Memory.user_id == user_id)
        .order_by(Memory.updated_at.desc(), Memory.id.desc())
    )

    def after(last: Row[Any]) -> Any:
        position = tuple_(literal(last.updated_at), literal(last.id))
        return tuple_(Memory.updated_at, Memory.id) < position

    async for rows in _pages(session, query, size=size, after=after):
        yield [_record(row) for row in rows]


async def change_pages(
    session: AsyncSession, user_id: int, *, size: int = PAGE
) -> AsyncIterator[list[LedgerRow]]:
    """The person's ledger rows of changes (every action but reads), oldest first, ``size``
    at a time. Not a read of its own: call it after ``read_everything``."""
    query = (
        select(*_LOG_COLUMNS)
        .where(MemoryLog.user_id == user_id, MemoryLog.action != Action.READ)
        .order_by(MemoryLog.id)
    )

    def after(last: Row[Any]) -> Any:
        return MemoryLog.id > last.id

    async for rows in _pages(session, query, size=size, after=after):
        yield [_ledger_row(row) for row in rows]


async def read_counts(session: AsyncSession, user_id: int) -> list[ReadCount]:
    """How many times the person's profile was read, per actor and month (UTC), oldest month
    first: the read rows counted in Postgres (never listed), and those already folded into
    counts (``roll_up_reads``), in one statement."""
    month = cast(func.date_trunc("month", func.timezone("UTC", MemoryLog.created_at)), Date)
    live = (
        select(MemoryLog.actor, month.label("month"), func.count().label("reads"))
        .where(MemoryLog.user_id == user_id, MemoryLog.action == Action.READ)
        .group_by(MemoryLog.actor, month)
    )
    folded = select(MemoryReadCount.actor, MemoryReadCount.month, MemoryReadCount.reads).where(
        MemoryReadCount.user_id == user_id
    )
    both = union_all(live, folded).subquery()
    rows = await session.execute(
        select(both.c.actor, both.c.month, func.sum(both.c.reads))
        .group_by(both.c.actor, both.c.month)
        .order_by(both.c.month, both.c.actor)
    )
    return [ReadCount(actor, at.strftime("%Y-%m"), int(n)) for actor, at, n in rows.tuples()]


_ROLL_UP = text(
    f"""
    WITH picked AS (
        SELECT id FROM memory_log
        WHERE {ROLLUP_CANDIDATES} AND created_at < :cutoff
        ORDER BY id LIMIT :limit
    ), gone AS (
        DELETE FROM memory_log AS m USING picked WHERE m.id = picked.id
        RETURNING m.user_id, m.actor, m.created_at
    ), counted AS (
        SELECT user_id, actor,
               CAST(date_trunc('month', timezone('UTC', created_at)) AS date) AS month,
               count(*) AS reads
        FROM gone GROUP BY 1, 2, 3
    ), kept AS (
        INSERT INTO memory_read_counts AS c (user_id, actor, month, reads)
        SELECT user_id, actor, month, reads FROM counted
        ON CONFLICT (user_id, actor, month) DO UPDATE SET reads = c.reads + excluded.reads
    )
    SELECT coalesce(sum(reads), 0) FROM counted
    """
)


async def roll_up_reads(session: AsyncSession, *, cutoff: datetime, limit: int) -> int:
    """Fold up to ``limit`` of the oldest read rows from before ``cutoff`` into the monthly
    counts, and remove them; how many. A reply prompt's read that found memories stays a
    row: an erasure follows it to the reply that held them (``reply_reads``)."""
    folded = await session.scalar(_ROLL_UP, {"cutoff": cutoff, "limit": limit})
    return int(folded or 0)


async def mark_reviewed(session: AsyncSession, ids: Collection[int]) -> None:
    """The decay review looked at these (bookkeeping, not a change of any memory's content)."""
    if ids:
        await session.execute(
            update(Memory).where(Memory.id.in_(list(ids))).values(reviewed_at=func.now())
        )


# --- changes ----------------------------------------------------------------------------------


def unchanged(current: MemoryRecord | None, expected: MemoryRecord) -> bool:
    """The record is exactly as it was read (same text, untouched since)."""
    return (
        current is not None
        and current.user_id == expected.user_id
        and current.content == expected.content
        and current.updated_at == expected.updated_at
    )


async def _locked_current(
    session: AsyncSession, memory_id: int, owner: int | None = None
) -> MemoryRecord | None:
    """The row fresh from the database and locked, with its owner's lock held; None when it
    does not exist (or is not ``owner``'s)."""
    if owner is None:
        owner = await session.scalar(select(Memory.user_id).where(Memory.id == memory_id))
        if owner is None:
            return None
    await lock_owners(session, [owner])
    row = await session.scalar(
        _fresh(Memory.id == memory_id, Memory.user_id == owner).with_for_update()
    )
    return _record(row) if row is not None else None


async def add(
    session: AsyncSession,
    user_id: int,
    content: str,
    why: Why,
    *,
    learned_in: Place | None,
    sources: Sequence[SourceMessage] = (),
    source: str = "self",
) -> MemoryRecord:
    """A new memory with the origin of the place it was learned in and links to the
    messages it was learned from."""
    await lock_owners(session, [user_id])
    origin = Origin.learned_in(learned_in)
    row = await session.scalar(
        insert(Memory)
        .values(
            user_id=user_id,
            content=content,
            source=source,
            search_tokens=tokenize(content),
            **_origin_values(origin),
        )
        .returning(Memory)
        .execution_options(populate_existing=True)
    )
    assert row is not None
    record = _record(row)
    await _link_sources(session, record.id, sources, why.trigger)
    await _log(session, why, Action.ADD, user_id, record.id, None, encode(record))
    return record


async def _link_sources(
    session: AsyncSession, memory_id: int, sources: Sequence[SourceMessage], trigger: str | None
) -> None:
    if not sources:
        return
    await session.execute(
        pg_insert(MemorySource)
        .values(
            [
                {
                    "memory_id": memory_id,
                    "message_id": s.message_id,
                    "channel_id": s.channel_id,
                    "guild_id": s.guild_id,
                    "trigger": trigger,
                }
                for s in sources
            ]
        )
        .on_conflict_do_nothing()
    )


async def rewrite(
    session: AsyncSession,
    expected: MemoryRecord,
    content: str,
    why: Why,
    *,
    learned_in: Place | None,
    sources: Sequence[SourceMessage] = (),
) -> MemoryRecord | None:
    """Rewrite the text (and touch updated_at) only if the record is still as ``expected``;
    None when it changed or went since (the later change wins). What was learned in
    ``learned_in`` narrows the origin, never widens it."""
    current = await _locked_current(session, expected.id, expected.user_id)
    if current is None or not unchanged(current, expected):
        return None
    origin = current.origin.narrowed_by(learned_in)
    row = await session.scalar(
        update(Memory)
        .where(Memory.id == expected.id)
        .values(
            content=content,
            search_tokens=tokenize(content),
            updated_at=func.now(),
            reviewed_at=None,
            **_origin_values(origin),
        )
        .returning(Memory)
        .execution_options(populate_existing=True)
    )
    assert row is not None
    record = _record(row)
    await _link_sources(session, record.id, sources, why.trigger)
    await _log(
        session, why, Action.UPDATE, record.user_id, record.id, encode(current), encode(record)
    )
    return record


@dataclass(frozen=True, slots=True)
class Written:
    """What an add or a rewrite became after the near-duplicate check: ``record`` holds the
    text now; ``duplicate`` names the existing memory that took it instead of a new row (or
    of a copy), and ``folded`` is a rewritten memory deleted because it would repeat it."""

    record: MemoryRecord
    duplicate: Duplicate | None = None
    folded: MemoryRecord | None = None


async def add_distinct(
    session: AsyncSession,
    user_id: int,
    content: str,
    why: Why,
    *,
    learned_in: Place | None,
    sources: Sequence[SourceMessage] = (),
) -> Written:
    """``add``, unless a memory visible where it was learned already says the same: that one
    is updated with the new text instead (or refreshed, when the new text adds nothing)."""
    await lock_owners(session, [user_id])
    duplicate = await _duplicate_of(session, user_id, content, learned_in, exclude=None)
    if duplicate is None:
        return Written(
            await add(session, user_id, content, why, learned_in=learned_in, sources=sources)
        )
    reason = f"{why.reason}: {duplicate.reason()}, kept instead of adding"
    merged = await _merge(
        session, duplicate, content, replace(why, reason=reason), learned_in, sources
    )
    return Written(merged, duplicate)


async def rewrite_distinct(
    session: AsyncSession,
    expected: MemoryRecord,
    content: str,
    why: Why,
    *,
    learned_in: Place | None,
    sources: Sequence[SourceMessage] = (),
) -> Written | None:
    """``rewrite``, unless the new text repeats another memory visible there: that one takes
    the text and this one, which would only copy it, is deleted. None when ``expected``
    changed or went since it was read."""
    current = await _locked_current(session, expected.id, expected.user_id)
    if current is None or not unchanged(current, expected):
        return None
    duplicate = await _duplicate_of(session, current.user_id, content, learned_in, current.id)
    if duplicate is None:
        done = await rewrite(session, current, content, why, learned_in=learned_in, sources=sources)
        return Written(done) if done is not None else None
    kept = f"{why.reason}: {duplicate.reason()}, kept instead of rewriting {current.id}"
    merged = await _merge(
        session, duplicate, content, replace(why, reason=kept), learned_in, sources
    )
    folded = f"{why.reason}: folded into memory {duplicate.memory_id} ({duplicate.kind})"
    await _delete(session, [current], replace(why, reason=folded), redact=False)
    return Written(merged, duplicate, folded=current)


async def _merge(
    session: AsyncSession,
    duplicate: Duplicate,
    content: str,
    why: Why,
    learned_in: Place | None,
    sources: Sequence[SourceMessage],
) -> MemoryRecord:
    """The existing memory takes the new text (keeps its own when the new one adds nothing,
    and is refreshed): one logged update, its sources joined by the new ones."""
    current = await _locked_current(session, duplicate.memory_id)
    assert current is not None  # found under the owner's lock, which is still held
    text = current.content if duplicate.kind.adds_nothing else content
    done = await rewrite(session, current, text, why, learned_in=learned_in, sources=sources)
    assert done is not None
    return done


async def delete_one(
    session: AsyncSession,
    memory_id: int,
    why: Why,
    *,
    owner: int | None = None,
    expected: MemoryRecord | None = None,
    visible_in: Place | None = None,
    redact: bool = False,
) -> MemoryRecord | None:
    """Delete one memory and log it; None when it is gone, is not ``owner``'s, may not
    surface in ``visible_in``, or changed since ``expected``. The ledger keeps the before
    state unless ``redact``."""
    if owner is None and expected is not None:
        owner = expected.user_id
    current = await _locked_current(session, memory_id, owner)
    if current is None or (visible_in is not None and not current.origin.visible_in(visible_in)):
        return None
    if expected is not None and not unchanged(current, expected):
        return None
    await _delete(session, [current], why, redact=redact)
    return current


async def delete_owned_by(
    session: AsyncSession, user_id: int, why: Why, *, redact: bool = False
) -> list[MemoryRecord]:
    """Delete every memory the person has, each logged; ascending ids."""
    await lock_owners(session, [user_id])
    rows = await session.scalars(_fresh(Memory.user_id == user_id).order_by(Memory.id))
    records = [_record(row) for row in rows]
    await _delete(session, records, why, redact=redact)
    return records


async def forget_everything(session: AsyncSession, user_id: int, why: Why) -> list[MemoryRecord]:
    """`!memory forget all`: every memory deleted and logged, and one row for the person
    (memory_id null) saying they asked, even when nothing was left to delete, so no later
    rollback restores a memory of theirs that an earlier night had removed."""
    gone = await delete_owned_by(session, user_id, why)
    await _log(session, why, Action.DELETE, user_id, None, None, {"forgot_all": len(gone)})
    return gone


async def _delete(
    session: AsyncSession, records: Sequence[MemoryRecord], why: Why, *, redact: bool
) -> None:
    """The one delete-and-log sequence (owners' locks already held)."""
    if not records:
        return
    await session.execute(delete(Memory).where(Memory.id.in_([r.id for r in records])))
    for record in records:
        before = dict(REDACTED) if redact else encode(record)
        await _log(session, why, Action.DELETE, record.user_id, record.id, before, None)
    if redact:
        await _redact_history(session, [r.id for r in records])


_REDACT = """
    UPDATE memory_log SET
        before = CASE WHEN coalesce(jsonb_typeof(before), 'null') = 'null' THEN before
                      ELSE CAST(:marker AS jsonb) END,
        after = CASE WHEN coalesce(jsonb_typeof(after), 'null') = 'null' THEN after
                     ELSE CAST(:marker AS jsonb) END
    WHERE action <> 'read' AND {scope}
      AND ((coalesce(jsonb_typeof(before), 'null') <> 'null'
            AND before IS DISTINCT FROM CAST(:marker AS jsonb))
           OR (coalesce(jsonb_typeof(after), 'null') <> 'null'
               AND after IS DISTINCT FROM CAST(:marker AS jsonb)))
"""


async def _redact(session: AsyncSession, scope: str, args: dict[str, object]) -> int:
    """Ledger rows keep their ids, actor, action and time but not the text: a before/after
    that held a state becomes {"redacted": true}. Read rows (lists of ids) stay as they are."""
    statement = text(_REDACT.format(scope=scope))
    result = await session.execute(statement, {"marker": json.dumps(REDACTED), **args})
    return int(getattr(result, "rowcount", 0))


async def _redact_history(session: AsyncSession, memory_ids: Sequence[int]) -> int:
    return await _redact(session, "memory_id = ANY(:ids)", {"ids": list(memory_ids)})


# --- erasure (in bounded batches, by owner) and retention --------------------------------


async def erase_batch(
    session: AsyncSession, user_id: int, why: Why, *, limit: int
) -> tuple[int, int]:
    """Delete up to ``limit`` of the person's memories, each logged with its history's text
    redacted, and their sources; ``(memories deleted, ledger rows redacted)``, (0, 0) when
    none are left."""
    await lock_owners(session, [user_id])
    rows = await session.scalars(_fresh(Memory.user_id == user_id).limit(limit).with_for_update())
    records = [_record(row) for row in rows]
    if not records:
        return 0, 0
    ids = [r.id for r in records]
    redacted = await _redact_history(session, ids)
    await session.execute(delete(MemorySource).where(MemorySource.memory_id.in_(ids)))
    await _delete(session, records, why, redact=True)
    return len(records), redacted


async def redact_ledger_batch(
    session: AsyncSession, user_id: int, *, after_id: int, limit: int
) -> tuple[int | None, int]:
    """Redact the text of the person's next ``limit`` ledger rows after ``after_id``: they
    keep their ids, actor, action and time. ``(last id looked at or None when none are
    left, rows redacted)``."""
    batch = (
        select(MemoryLog.id)
        .where(MemoryLog.user_id == user_id, MemoryLog.id > after_id)
        .order_by(MemoryLog.id)
        .limit(limit)
        .subquery()
    )
    last = await session.scalar(select(func.max(batch.c.id)))
    if last is None:
        return None, 0
    scope = "user_id = :user_id AND id > :after AND id <= :last"
    args: dict[str, object] = {"user_id": user_id, "after": after_id, "last": int(last)}
    return int(last), await _redact(session, scope, args)


async def reply_reads(
    session: AsyncSession, user_id: int, *, after_id: int, limit: int
) -> list[tuple[int, str]]:
    """(ledger id, trigger) of the reply prompts that read the person's memories and found
    some, oldest first: the turns whose replies held them."""
    rows = await session.execute(
        select(MemoryLog.id, MemoryLog.trigger)
        .where(
            MemoryLog.user_id == user_id,
            MemoryLog.action == Action.READ,
            text(FED_A_REPLY),
            MemoryLog.id > after_id,
        )
        .order_by(MemoryLog.id)
        .limit(limit)
    )
    return [(int(i), str(t)) for i, t in rows.tuples()]


async def learned_from(session: AsyncSession, message_ids: Collection[int]) -> list[int]:
    """The memories learned from these messages (their recorded sources)."""
    if not message_ids:
        return []
    rows = await session.scalars(
        select(MemorySource.memory_id)
        .where(MemorySource.message_id == any_array(message_ids))
        .distinct()
    )
    return list(rows)


async def replace_mentions(
    session: AsyncSession, memory_ids: Collection[int], user_id: int, token: str, why: Why
) -> int:
    """In these memories (someone else's, learned from a message that mentioned the erased
    person), the mention is replaced by ``token``, in the text and in its ledger history;
    each change logged. Nothing else of the text changes."""
    pattern = mention_pattern(user_id)
    owners = await session.scalars(
        select(Memory.user_id).where(Memory.id == any_array(memory_ids)).distinct()
    )
    await lock_owners(session, owners)
    rows = await session.scalars(
        _fresh(Memory.id == any_array(memory_ids), Memory.content.regexp_match(pattern))
        .order_by(Memory.id)
        .with_for_update()
    )
    changed = 0
    for row in rows:
        row_after = await session.scalar(
            update(Memory)
            .where(Memory.id == row.id)
            .values(content=func.regexp_replace(Memory.content, pattern, token, "g"))
            .returning(Memory)
            .execution_options(populate_existing=True)
        )
        assert row_after is not None
        await session.execute(
            _REPLACE_IN_HISTORY, {"id": row.id, "pattern": pattern, "token": token}
        )
        after = _record(row_after)
        # The text before held the mention: the row says a change happened, not from what.
        await _log(
            session, why, Action.UPDATE, after.user_id, after.id, dict(REDACTED), encode(after)
        )
        changed += 1
    return changed


_REPLACE_IN_HISTORY = text(
    """
    UPDATE memory_log SET
        before = CAST(regexp_replace(CAST(before AS text), :pattern, :token, 'g') AS jsonb),
        after = CAST(regexp_replace(CAST(after AS text), :pattern, :token, 'g') AS jsonb)
    WHERE memory_id = :id AND action <> 'read'
    """
)


async def record_erasure(session: AsyncSession, user_id: int, why: Why, receipt: Any) -> None:
    """The erasure's receipt row: counts only, keyed by the person's id."""
    await _log(session, why, Action.DELETE, user_id, None, None, receipt)


async def erased_users(session: AsyncSession) -> set[int]:
    """Everyone who was ever erased (their receipt rows stay, keyed by id)."""
    rows = await session.scalars(
        select(MemoryLog.user_id).where(MemoryLog.actor == Actor.FORGETME).distinct()
    )
    return set(rows)


async def purge_expired(
    session: AsyncSession, *, cutoff: datetime, why: Why, limit: int
) -> list[int]:
    """Delete memories not updated since ``cutoff`` (oldest first, at most ``limit``), each
    logged; the ids deleted, ascending."""
    candidates = (
        await session.execute(
            select(Memory.id, Memory.user_id)
            .where(Memory.updated_at < cutoff)
            .order_by(Memory.updated_at, Memory.id)
            .limit(limit)
        )
    ).all()
    if not candidates:
        return []
    await lock_owners(session, {user_id for _, user_id in candidates})
    # Re-checked under the locks: a memory refreshed meanwhile is no longer expired.
    rows = await session.scalars(
        _fresh(
            Memory.id.in_([memory_id for memory_id, _ in candidates]), Memory.updated_at < cutoff
        )
        .order_by(Memory.id)
        .with_for_update()
    )
    records = [_record(row) for row in rows]
    # Durable is not indefinite (MEM-06): the ledger keeps that it happened, not the text.
    await _delete(session, records, why, redact=True)
    return [record.id for record in records]


async def redact_content_before(session: AsyncSession, cutoff: datetime) -> set[int]:
    """Ledger content retention: rows older than ``cutoff`` keep their ids, actor, action,
    run and time, but no memory text. The runs whose rows lost their text (they can no longer
    be rolled back)."""
    statement = text(_REDACT.format(scope="created_at < :cutoff") + " RETURNING run_id")
    result = await session.execute(statement, {"marker": json.dumps(REDACTED), "cutoff": cutoff})
    return {run_id for (run_id,) in result if run_id is not None}


# --- the ledger, read by the write path, the nightly summary and the rollback ------------


async def trigger_applied(session: AsyncSession, *, user_id: int, trigger: str) -> bool:
    """True when an earlier run of this trigger already changed this person's memories.

    Scoped by user so the lookup rides the (user_id, trigger) index."""
    query = select(
        exists().where(
            MemoryLog.user_id == user_id,
            MemoryLog.trigger == trigger,
            MemoryLog.action.in_((*UNDOABLE, Action.ROLLBACK)),
        )
    )
    return bool((await session.execute(query)).scalar_one())


async def run_entries(session: AsyncSession, run_id: int) -> list[LogEntry]:
    """The run's undoable ledger rows, newest first."""
    rows = await session.scalars(
        select(MemoryLog)
        .where(MemoryLog.run_id == run_id, MemoryLog.action.in_(UNDOABLE))
        .order_by(MemoryLog.id.desc())
    )
    return [
        LogEntry(row.id, row.memory_id, row.user_id, row.action, row.before, row.after)
        for row in rows
    ]


async def run_changes(
    session: AsyncSession, run_id: int, actors: Sequence[Actor]
) -> list[tuple[int, Actor, Action]]:
    """(memory id, actor, action) of every change the run made, in ledger order."""
    rows = await session.execute(
        select(MemoryLog.memory_id, MemoryLog.actor, MemoryLog.action)
        .where(
            MemoryLog.run_id == run_id,
            MemoryLog.actor.in_(actors),
            MemoryLog.action.in_(UNDOABLE),
            MemoryLog.memory_id.is_not(None),
        )
        .order_by(MemoryLog.id)
    )
    return [(int(memory_id), Actor(actor), Action(action)) for memory_id, actor, action in rows]


async def forgotten(session: AsyncSession, entries: Sequence[LogEntry]) -> Forgotten:
    """Every ledger row that forgot one of these memories, or everything of one of their
    owners (what a rollback must never bring back)."""
    memory_ids = {e.memory_id for e in entries if e.memory_id is not None}
    user_ids = {e.user_id for e in entries}
    if not memory_ids:
        return Forgotten()
    rows = await session.execute(
        select(MemoryLog.id, MemoryLog.memory_id, MemoryLog.user_id, MemoryLog.actor).where(
            MemoryLog.action == Action.DELETE,
            MemoryLog.actor.in_([*FORGOT_MEMORY, *FORGOT_PERSON]),
            MemoryLog.memory_id.in_(memory_ids)
            | (MemoryLog.memory_id.is_(None) & MemoryLog.user_id.in_(user_ids)),
        )
    )
    memories: dict[int, list[Forgetting]] = {}
    people: dict[int, list[Forgetting]] = {}
    for ledger_id, memory_id, user_id, actor in rows:
        if memory_id is not None:
            memories.setdefault(memory_id, []).append(Forgetting(ledger_id, Actor(actor)))
        elif actor in FORGOT_PERSON:
            people.setdefault(user_id, []).append(Forgetting(ledger_id, Actor(actor), True))
    return Forgotten(memories, people)


async def current_for_rollback(
    session: AsyncSession, entries: Sequence[LogEntry]
) -> dict[int, MemoryRecord]:
    """The entries' memories as they are now, their owners locked and the rows locked."""
    await lock_owners(session, {entry.user_id for entry in entries})
    ids = {entry.memory_id for entry in entries if entry.memory_id is not None}
    if not ids:
        return {}
    rows = await session.scalars(_fresh(Memory.id.in_(ids)).with_for_update())
    return {row.id: _record(row) for row in rows}


async def rollback_delete(session: AsyncSession, current: MemoryRecord, why: Why) -> None:
    """Undo an add (the caller checked the record is still what the run wrote)."""
    await session.execute(delete(Memory).where(Memory.id == current.id))
    await _log(session, why, Action.ROLLBACK, current.user_id, current.id, encode(current), None)


async def rollback_restore(
    session: AsyncSession, current: MemoryRecord, restored: MemoryRecord, why: Why
) -> None:
    """Undo an update: the before content (and its updated_at) back."""
    # The older text comes back under the current origin: a rollback never widens it.
    values: dict[str, Any] = {
        "content": restored.content,
        "search_tokens": tokenize(restored.content),
    }
    if restored.updated_at is not None:
        values["updated_at"] = restored.updated_at
    await session.execute(update(Memory).where(Memory.id == current.id).values(values))
    await _log(
        session,
        why,
        Action.ROLLBACK,
        current.user_id,
        current.id,
        encode(current),
        encode(restored),
    )


async def rollback_reinsert(session: AsyncSession, restored: MemoryRecord, why: Why) -> None:
    """Undo a delete: the before state back under its own id (the id is still free)."""
    # memories.id is GENERATED BY DEFAULT, so the original id can be written back.
    values: dict[str, Any] = {
        "id": restored.id,
        "user_id": restored.user_id,
        "content": restored.content,
        "search_tokens": tokenize(restored.content),
        "source": restored.source,
        **_origin_values(restored.origin),
    }
    if restored.created_at is not None:
        values["created_at"] = restored.created_at
    if restored.updated_at is not None:
        values["updated_at"] = restored.updated_at
    await session.execute(insert(Memory).values(values))
    await _log(session, why, Action.ROLLBACK, restored.user_id, restored.id, None, encode(restored))


# --- import (MEM-08) --------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ImportView:
    """What the store already holds of an import: owners of these ids, ids with history of
    their own here (changed or deleted since), and ledger rows already imported."""

    owners: dict[int, int]
    history: set[int]
    imported_keys: set[str]


async def import_view(
    session: AsyncSession, memory_ids: Sequence[int], log_keys: Sequence[str], prefix: str
) -> ImportView:
    owners = await session.execute(
        select(Memory.id, Memory.user_id).where(Memory.id == any_array(memory_ids))
    )
    history = await session.scalars(
        select(MemoryLog.memory_id)
        .where(MemoryLog.memory_id == any_array(memory_ids))
        .where(or_(MemoryLog.trigger.is_(None), ~MemoryLog.trigger.startswith(prefix)))
        .distinct()
    )
    keys = await session.scalars(
        select(MemoryLog.trigger).where(
            MemoryLog.trigger == any_(literal(list(log_keys), ARRAY(Text)))
        )
    )
    return ImportView(
        owners={memory_id: user_id for memory_id, user_id in owners},
        history={i for i in history if i is not None},
        imported_keys={k for k in keys if k is not None},
    )


async def insert_imported(
    session: AsyncSession,
    memories: Sequence[dict[str, Any]],
    ledger_rows: Sequence[dict[str, Any]],
) -> tuple[int, int]:
    """Memories and ledger rows exactly as an earlier deployment recorded them (ids kept;
    ones that exist by now are skipped); how many of each went in."""
    added = 0
    if memories:
        rows = [{**m, "search_tokens": tokenize(str(m["content"]))} for m in memories]
        statement = pg_insert(Memory).on_conflict_do_nothing().returning(Memory.id)
        added = len((await session.execute(statement, rows)).all())
    logged = 0
    if ledger_rows:
        statement = insert(MemoryLog).returning(MemoryLog.id)
        logged = len((await session.execute(statement, list(ledger_rows))).all())
    await bump_identity(session, "memories")
    return added, logged
