"""What every part of the memory store shares: the row mapping, the owner's lock, the ledger rows
each operation writes (in the one JSON codec) and the commit-time change metrics."""

from __future__ import annotations

import json
from collections import Counter as Tally
from collections.abc import Callable, Iterable, Sequence
from dataclasses import replace
from functools import lru_cache
from typing import Any

from prometheus_client import Counter
from sqlalchemy import (
    delete,
    event,
    func,
    insert,
    select,
    text,
)
from sqlalchemy.engine import Dialect, Row
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm import Session

from app.channel.exchange import Place
from app.kit.locks import lock_key
from app.kit.relevance import Fusion, Query, Ranking, SearchTable, ranked, term_weights
from app.kit.tokens import tokenize
from app.kit.vectors import Embedding
from app.memory.duplicates import Duplicate, find_duplicate
from app.memory.records import (
    REDACTED,
    MemoryRecord,
    Origin,
    Why,
    encode,
)
from app.models.memory import (
    VECTOR_INDEX,
    VECTOR_INDEX_DIMENSIONS,
    Memory,
    MemoryLog,
)
from app.vocabulary import Action, Actor

LOCK_NAMESPACE = "memory-user"


RECENT_LIMIT = 10


SEARCH_LIMIT = 10


# The ranked reads (MEMORY_RECALL=relevant, `!memory search`, the near-duplicate check).
MEMORIES = SearchTable(
    "memories",
    "updated_at",
    "user_id",
    crowd="crowd",
    indexed=VECTOR_INDEX,
    indexed_dimensions=VECTOR_INDEX_DIMENSIONS,
)


# Chosen on bench/recall.py's tuning half (`--tune`): idf squared, the shipped prior; the
# sample and probes bound the cost for a profile of 10⁴ (bench/recall.py, "scale").
RANKING = Ranking(idf_power=2.0, sample=300, probe_rows=25)


MATCHES = replace(RANKING, min_score=1e-9)  # only rows that share a word with the query


# By meaning too (EMBEDDINGS_BASE_URL set): chosen on bench/recall.py's tuning half (`--tune`).
# Short facts: every one of the newest 2000 is compared; the floor keeps `!memory search` to
# memories clearly nearer the words than the rest. A memory that is one of a crowd of
# look-alikes loses its crowd figure, its mean similarity to its 10 nearest among the person's
# memories (stored per row, app/memory/store/crowds.py): with multilingual-e5-small, everyday
# notes ("wants to learn more about …") are near any vague question and crowded out the one
# fact it was about (tuning half, questions sharing no word: 0.42 → 0.95; across languages
# 0.38 → 0.94). Ten, not fewer: a memory in the profile's minority language sits among the few
# others in that language, and five neighbours would count them as its crowd
# (tests/e2e/test_meaning_turn.py, calligraphy).
FUSION = Fusion(k=20.0, words=0.5, meaning=2.0, sample=2000, candidates=50, hub_weight=1.0)
MATCHING = replace(FUSION, min_meaning=2.0)


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


async def _log(
    session: AsyncSession,
    why: Why,
    action: Action,
    user_id: int,
    memory_id: int | None,
    before: Any,
    after: Any,
) -> None:
    operators_read = action is Action.READ and why.actor == Actor.ADMIN
    if operators_read and await _read_since_last_change(session, why, user_id, after):
        return
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


async def _read_since_last_change(session: AsyncSession, why: Why, user_id: int, read: Any) -> bool:
    """Whether the same operator's read of ``user_id`` (same reason, same rows ``read``) is
    already logged since the profile last changed: an inspecting console that refreshes adds
    a read once per change, not once per refresh."""
    last_change = (
        select(func.coalesce(func.max(MemoryLog.id), 0))
        .where(MemoryLog.user_id == user_id, MemoryLog.action != Action.READ)
        .scalar_subquery()
    )
    found = await session.scalar(
        select(MemoryLog.id)
        .where(
            MemoryLog.user_id == user_id,
            MemoryLog.actor == Actor.ADMIN,
            MemoryLog.action == Action.READ,
            MemoryLog.reason == why.reason,
            MemoryLog.after == read,
            MemoryLog.id > last_change,
        )
        .limit(1)
    )
    return found is not None


async def _log_read(
    session: AsyncSession, why: Why, user_id: int, records: Sequence[MemoryRecord]
) -> None:
    """One row per read, even an empty one: memory_id null, `after` the ids read."""
    ids = [record.id for record in records]
    await _log(session, why, Action.READ, user_id, None, None, ids)


def _visible_in(place: Place | None) -> Any:
    """The rows an origin lets surface in ``place`` (None: everywhere, e.g. the owner's own
    listing). In a DM with the owner every memory may surface; in a guild only memories
    learned in that guild (and rows written by hand, which have no origin)."""
    if place is None or place.is_dm:
        return True
    return (Memory.origin == "any") | (
        (Memory.origin == "guild") & (Memory.origin_guild_id == place.guild_id)
    )


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
    meaning: Embedding | None = None,
    fusion: Fusion = FUSION,
) -> list[MemoryRecord]:
    """The best ``limit`` memories for ``query`` (and its vector, ``meaning``) among those
    that may surface in ``place``, best first (not logged: the callers log what they hand
    out)."""
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
        meaning=meaning,
        fusion=fusion,
    )
    return [_record(row) for row, _ in found]


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
    weight = await _word_weights(session, user_id, place, [content, *(t for _, t in candidates)])
    return find_duplicate(content, candidates, weight)


async def _word_weights(
    session: AsyncSession, user_id: int, place: Place | None, texts: Sequence[str]
) -> Callable[[str], float]:
    """Each word of ``texts`` weighted by how rare it is among the person's memories."""
    words = {t for content in texts for t in tokenize(content)}
    return await term_weights(
        session,
        MEMORIES,
        where=_visible_sql(session, place),
        scope_id=user_id,
        terms=words,
        ranking=RANKING,
    )


def _fresh(*where: Any) -> Any:
    return select(Memory).where(*where).execution_options(populate_existing=True)


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
