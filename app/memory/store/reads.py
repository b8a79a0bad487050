"""The store's reads, each one logged: a person's memories newest first or ranked, search, counts,
sources, history, provenance, and the whole profile a page at a time for exports and full
listings."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Collection, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import (
    Date,
    Select,
    Text,
    cast,
    func,
    insert,
    literal,
    select,
    text,
    tuple_,
    union_all,
    update,
)
from sqlalchemy.dialects.postgresql import JSONB, aggregate_order_by
from sqlalchemy.engine import Row
from sqlalchemy.ext.asyncio import AsyncSession

from app.channel.exchange import Place
from app.kit.relevance import Fusion, Query, Ranking
from app.kit.sql import any_array
from app.kit.tokens import token_set
from app.kit.vectors import Embedding
from app.memory.duplicates import weighted_overlap
from app.memory.records import (
    LedgerRow,
    MemoryRecord,
    Provenance,
    ReadCount,
    SourceMessage,
    Why,
)
from app.memory.store.rows import (
    FUSION,
    MATCHES,
    MATCHING,
    MEMORIES,
    RANKING,
    RECENT_LIMIT,
    SEARCH_LIMIT,
    _fresh,
    _log,
    _log_read,
    _ranked,
    _record,
    _visible_in,
    _visible_sql,
    _word_weights,
    lock_owners,
)
from app.models.memory import (
    ROLLUP_CANDIDATES,
    Memory,
    MemoryLog,
    MemoryReadCount,
    MemorySource,
)
from app.vocabulary import Action


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


async def relevant(
    session: AsyncSession,
    user_id: int,
    why: Why,
    *,
    query: Query,
    place: Place | None = None,
    limit: int = RECENT_LIMIT,
    ranking: Ranking = RANKING,
    meaning: Embedding | None = None,
    fusion: Fusion = FUSION,
) -> list[MemoryRecord]:
    """Up to ``limit`` of the person's memories that may surface in ``place``, chosen by
    relevance to ``query`` (newer first among equals; the newest when nothing is relevant)
    and, given its vector (``meaning``), by meaning too; listed newest first like
    ``recent``, so a profile of ``limit`` or fewer reads the same either way. One logged
    read. (``ranking``, ``fusion``: the shipped parameters; the benchmark tries others on
    its tuning half.)"""
    if query.empty and meaning is None:
        return await recent(session, user_id, why, limit=limit, place=place)
    await lock_owners(session, [user_id])
    chosen = await _ranked(session, user_id, query, place, limit, ranking, meaning, fusion)
    records = sorted(chosen, key=lambda r: (r.updated_at, r.id), reverse=True)
    await _log_read(session, why, user_id, records)
    return records


async def search(
    session: AsyncSession,
    user_id: int,
    why: Why,
    query: Query,
    *,
    limit: int = SEARCH_LIMIT,
    meaning: Embedding | None = None,
) -> list[MemoryRecord]:
    """All of the person's memories (their own search, wherever they ask) that share a word
    with ``query`` or, given its vector (``meaning``), are clearly nearest to it in meaning,
    best first as ``relevant`` ranks them, at most ``limit``. One logged read, even an empty
    one."""
    await lock_owners(session, [user_id])
    found = []
    if not query.empty or meaning is not None:
        found = await _ranked(session, user_id, query, None, limit, MATCHES, meaning, MATCHING)
    await _log_read(session, why, user_id, found)
    return found


SUGGESTIONS = 25
_COUNT_READ = text(
    """
    INSERT INTO memory_read_counts AS c (user_id, actor, month, reads)
    VALUES (:user_id, :actor, CAST(date_trunc('month', timezone('UTC', now())) AS date), 1)
    ON CONFLICT (user_id, actor, month) DO UPDATE SET reads = c.reads + 1
    """
)


async def suggestions(
    session: AsyncSession, user_id: int, why: Why, typed: str, *, limit: int = SUGGESTIONS
) -> list[MemoryRecord]:
    """The person's own memories whose id starts with ``typed`` or whose text holds it, newest
    first: what a slash command's autocomplete offers them as they type. A read made per
    keystroke is counted, not listed: it joins the monthly read counts (as folded reads do,
    so an export still reports it), never a ledger row each."""
    query = _newest_first(user_id)
    if typed:
        query = query.where(
            cast(Memory.id, Text).startswith(typed, autoescape=True)
            | Memory.content.icontains(typed, autoescape=True)
        )
    rows = await session.scalars(query.limit(limit))
    await session.execute(_COUNT_READ, {"user_id": user_id, "actor": why.actor.value})
    return [_record(row) for row in rows]


_NEAR = """
WITH compared AS MATERIALIZED (
    SELECT id, 1 - (embedding <=> CAST(:vector AS halfvec)) AS similarity
    FROM memories
    WHERE user_id = :user_id AND {visible} AND embedding_space = :space{indexed}
    ORDER BY updated_at DESC, id DESC LIMIT :sample
),
spread AS (
    SELECT avg(similarity) AS mean, coalesce(stddev_pop(similarity), 0) AS sd,
           count(*) AS n
    FROM compared
)
SELECT c.id, c.similarity,
       CASE WHEN s.n >= :few AND s.sd > 0 THEN (c.similarity - s.mean) / s.sd ELSE 0 END
FROM compared c, spread s
ORDER BY c.similarity DESC, c.id DESC LIMIT :limit
"""
# Standings (how far above the person's memories at large a candidate is, in standard
# deviations) mean nothing among fewer memories than this: there, only words count.
FEW = 8


@dataclass(frozen=True, slots=True)
class Near:
    """A memory near a new text: its similarity, its standing among the person's memories
    (standard deviations above their mean similarity; 0 among few) and the weighted overlap
    of their words (app/memory/duplicates.py)."""

    record: MemoryRecord
    similarity: float
    standing: float
    overlap: float


async def near_repeats(
    session: AsyncSession,
    user_id: int,
    why: Why,
    text_of_new: str,
    vector: Embedding,
    *,
    place: Place | None,
    limit: int = 3,
) -> list[Near]:
    """The person's memories visible in ``place`` nearest in meaning to a new text (its
    ``vector``), nearest first, at most ``limit``: the memories it may repeat. One logged
    read (their texts may go to the decision model)."""
    await lock_owners(session, [user_id])
    indexed = f" AND {MEMORIES.indexed}" if MEMORIES.reads_index(vector) else ""
    statement = text(_NEAR.format(visible=_visible_sql(session, place), indexed=indexed))
    parameters = {"vector": vector.sql(), "space": vector.space, "user_id": user_id}
    parameters |= {"sample": FUSION.sample, "few": FEW, "limit": limit}
    found = {
        i: (float(sim), float(z))
        for i, sim, z in (await session.execute(statement, parameters)).tuples()
    }
    rows = await session.scalars(_fresh(Memory.id.in_(list(found))))
    records = sorted((_record(row) for row in rows), key=lambda r: -found[r.id][0])
    weight = await _word_weights(
        session, user_id, place, [text_of_new, *(r.content for r in records)]
    )
    new = token_set(text_of_new)
    near = [
        Near(r, *found[r.id], weighted_overlap(new, token_set(r.content), weight)) for r in records
    ]
    await _log_read(session, why, user_id, records)
    return near


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
