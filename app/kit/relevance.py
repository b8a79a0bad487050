"""Relevance ranking in SQL, shared by the owners of `memories` and `messages`.

A query is a set of tokens with weights (the triggering message counts fully, the lines
around it less). Each candidate row is scored with BM25 over its stored `search_tokens`,
term weights taken over the candidates themselves (a word in every one of them weighs
nothing), plus a small recency prior; ties go to the newer row.

The statistics come from the newest ``sample`` candidates, which are all of them for any
profile or channel of ordinary size. A larger scope is still searched whole for its rare
words: rows older than the sample that contain one of them join the candidates through the
GIN index, whose keys are scoped (`search_keys(scope, tokens)`: "<person or channel id>
<token>"), so a probe reads only this scope's rows with that word, however common the word
is elsewhere. Everything is bounded: the sample, the probed words and the rows each probe
may bring.

With a query vector (EMBEDDINGS_BASE_URL set) the same statement also ranks by meaning: the
scope's newest rows with a vector of the query's space are compared with it, those clearly
nearer than the rest (a floor in standard deviations above their mean similarity) are ranked
by similarity, and the two rankings are fused (weighted reciprocal ranks). A row without a
vector yet is found by its words alone. Without a vector the statement is the words' alone,
exactly as before. A table whose rows are spread over its heap (a person's memories, among
everybody's) keeps its vectors in a covering index in that order (SearchTable.indexed): the
newest vectors are then a few hundred consecutive index pages, not a heap page per row."""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, TypeVar

from sqlalchemy import Boolean, Float, TextClause, column, inspect, select, text
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm import DeclarativeBase

from app.kit.tokens import tokenize
from app.kit.vectors import Embedding

MAX_QUERY_TERMS = 64
Row = TypeVar("Row", bound=DeclarativeBase)  # a table's mapped class


@dataclass(frozen=True, slots=True)
class Query:
    """Distinct tokens and their weights, strongest first (at most MAX_QUERY_TERMS)."""

    terms: tuple[str, ...] = ()
    weights: tuple[float, ...] = ()

    @classmethod
    def of(cls, texts: Iterable[tuple[str, float]]) -> Query:
        """Each text's tokens at that text's weight; a token keeps its highest weight."""
        best: dict[str, float] = {}
        for content, weight in texts:
            for token in tokenize(content):
                if weight > best.get(token, 0.0):
                    best[token] = weight
        ranked = sorted(best.items(), key=lambda item: -item[1])[:MAX_QUERY_TERMS]
        return cls(tuple(t for t, _ in ranked), tuple(w for _, w in ranked))

    @property
    def empty(self) -> bool:
        return not self.terms


@dataclass(frozen=True, slots=True)
class Ranking:
    """The scoring's parameters (bench/recall.py tunes them on its tuning half only)."""

    k1: float = 1.2  # term-frequency saturation (BM25)
    b: float = 0.75  # length normalisation (BM25)
    # idf ** idf_power weighs each matched word: 1 is BM25; 2 also weighs the query's own
    # words by rarity (as tf-idf's query vector does), so one rare word ("risotto") outweighs
    # two middling ones ("want", "to").
    idf_power: float = 1.0
    prior: float = 1.0  # weight of the recency prior, at most this much for a new row
    prior_days: float = 60.0  # the prior halves about every 0.7 × this many days
    min_score: float = 0.0  # rows scoring less are not relevant (0: keep every row)
    # With a share above 0, a row is relevant only if it holds a telling query word: one in
    # at most one candidate, or with weight × idf ≥ share × the idf of a word no candidate
    # has. Scale-free, unlike a bare score floor (idf grows with the number of candidates).
    # Among fewer than ``telling_from`` candidates, too few to say which words are common,
    # any word of the message itself tells (not one only of the lines around it).
    min_telling: float = 0.0
    telling_from: int = 50
    sample: int = 500  # candidates the statistics are taken over (the newest)
    rare: float = 0.002  # a word in at most this share of the sample is probed for
    probe_terms: int = 8  # at most this many rare words probed beyond the sample
    probe_rows: int = 50  # rows each probe may bring


DEFAULT_RANKING = Ranking()


@dataclass(frozen=True, slots=True)
class Fusion:
    """How the meaning leg is read and fused with the words' (bench/recall.py tunes them on
    its tuning half only): each leg adds ``weight / (k + its rank)``."""

    k: float = 5.0  # reciprocal-rank constant: small lets a leg's first places count most
    words: float = 1.0  # weight of the words' ranking
    meaning: float = 1.0  # weight of the meaning's ranking
    sample: int = 2000  # the scope's newest rows compared with the query vector
    candidates: int = 50  # of those, at most this many nearest take part
    # A row takes part only when its similarity is at least this many standard deviations
    # above the sample's mean (scale-free: models differ in how similar unrelated texts are).
    min_meaning: float = -1e9
    # Hubness reduction (0: plain similarity): each row loses ``hub_weight`` × its crowd
    # figure, stored by the table's owner (SearchTable.crowd; a table without: nothing).
    hub_weight: float = 0.0


DEFAULT_FUSION = Fusion()


@dataclass(frozen=True, slots=True)
class SearchTable:
    """Where a ranked read runs: the table, its time column and its scope column (the GIN
    index over ``search_keys(<scope>, search_tokens)`` serves its probes)."""

    table: str
    at: str
    scope: str
    # The stored crowd figure (an SQL expression; NULL: the table keeps none, no discount).
    crowd: str = "CAST(NULL AS float8)"
    # A covering index of the scope's vectors in the meaning leg's order (scope, space, time
    # and id descending, with the vector and what the read filters and ranks by) holds the
    # rows of this condition, vectors of at most ``indexed_dimensions``: a read of such a space
    # repeats the condition, so the planner reads that index alone, not a heap page per row.
    # "": the table has none.
    indexed: str = ""
    indexed_dimensions: int = 0

    def reads_index(self, meaning: Embedding) -> bool:
        """Whether the vectors of ``meaning``'s space are read from the covering index."""
        return bool(self.indexed) and len(meaning.values) <= self.indexed_dimensions

    @property
    def keys(self) -> str:
        """The GIN index's expression (the SQL function migration 0008 defines): each token
        as "<scope id> <token>". A token never holds a space, so no two keys collide."""
        return f"search_keys({self.scope}, search_tokens)"


_HEAD = """
WITH q AS (
    SELECT term, max(weight) AS weight
    FROM unnest(CAST(:terms AS text[]), CAST(:weights AS float8[])) AS x(term, weight)
    GROUP BY term
),
sample AS MATERIALIZED (
    SELECT id, {at} AS at, search_tokens AS tokens FROM {table}
    WHERE {scope} = :scope_id AND {where}
    ORDER BY {at} DESC, id DESC LIMIT :sample
),
stats AS (
    SELECT count(*)::float8 AS n, coalesce(avg(cardinality(tokens)), 1)::float8 AS avgdl
    FROM sample
),
oldest AS (SELECT at, id FROM sample ORDER BY at, id LIMIT 1),
sample_hits AS MATERIALIZED (
    SELECT s.id, x.t AS term, count(*)::float8 AS tf, max(cardinality(s.tokens)) AS dl
    FROM sample s CROSS JOIN LATERAL unnest(s.tokens) AS x(t) JOIN q ON q.term = x.t
    GROUP BY s.id, x.t
),
df AS (
    SELECT q.term, q.weight, count(h.id)::float8 AS df
    FROM q LEFT JOIN sample_hits h ON h.term = q.term GROUP BY q.term, q.weight
),
weights AS (
    SELECT term, df, weight * power(idf, :idf_power) AS w,
           CASE WHEN n < :telling_from THEN weight >= 1
                ELSE df <= 1 OR weight * idf >= :min_telling * ln(1 + (n + 0.5) / 0.5)
           END AS telling
    FROM (SELECT term, df, weight, n, ln(1 + (n - df + 0.5) / (df + 0.5)) AS idf
          FROM df, stats) AS weighed
),
rare AS (
    SELECT term FROM weights, stats
    WHERE n >= :sample AND df <= :rare * n ORDER BY df, term LIMIT :probe_terms
),
extra AS MATERIALIZED (
    SELECT DISTINCT m.id, m.at, m.tokens
    FROM rare r CROSS JOIN oldest o CROSS JOIN LATERAL (
        -- OFFSET 0 keeps the probe on the scoped GIN index alone: combined with a time
        -- index it would read every row of the scope's window.
        SELECT id, {at} AS at, search_tokens AS tokens
        FROM (
            SELECT * FROM {table}
            WHERE {keys} @> ARRAY[CAST(:scope_id AS text) || ' ' || r.term] OFFSET 0
        ) AS {table}
        WHERE {where} AND ({at}, id) < (o.at, o.id)
        LIMIT :probe_rows
    ) AS m
),
extra_hits AS (
    SELECT e.id, x.t AS term, count(*)::float8 AS tf, max(cardinality(e.tokens)) AS dl
    FROM extra e CROSS JOIN LATERAL unnest(e.tokens) AS x(t) JOIN q ON q.term = x.t
    GROUP BY e.id, x.t
),
candidates AS (SELECT id, at FROM sample UNION ALL SELECT id, at FROM extra),
bm25 AS (
    SELECT h.id, bool_or(w.telling) AS telling, sum(
        w.w * h.tf * (:k1 + 1)
        / (h.tf + :k1 * (1 - :b + :b * h.dl / greatest(st.avgdl, 1)))
    ) AS score
    FROM (SELECT * FROM sample_hits UNION ALL SELECT * FROM extra_hits) AS h
    JOIN weights w ON w.term = h.term CROSS JOIN stats st
    GROUP BY h.id
),
"""

_WORDS_BEST = """
best AS (
    SELECT c.id, c.at, coalesce(b.score, 0) AS relevance,
           coalesce(b.score, 0)
           + :prior * exp(-greatest(extract(epoch FROM now() - c.at), 0) / (86400 * :prior_days))
               AS rank
    FROM candidates c LEFT JOIN bm25 b ON b.id = c.id
    WHERE coalesce(b.score, 0) >= :min_score
      AND (:min_telling <= 0 OR coalesce(b.telling, false))
    ORDER BY rank DESC, c.at DESC, c.id DESC
    LIMIT :limit
)
"""

_HYBRID_BEST = """
words AS (
    -- Rows that share no word with the query keep their place only as the newest (the
    -- words' fallback), never as a ranking that outweighs a match by meaning.
    SELECT c.id, c.at, coalesce(b.score, 0) AS relevance,
           row_number() OVER (
               PARTITION BY coalesce(b.score, 0) > 0
               ORDER BY coalesce(b.score, 0) + :prior * exp(
                   -greatest(extract(epoch FROM now() - c.at), 0) / (86400 * :prior_days)
               ) DESC, c.at DESC, c.id DESC
           ) AS place
    FROM candidates c LEFT JOIN bm25 b ON b.id = c.id
    WHERE coalesce(b.score, 0) >= :min_score
      AND (:min_telling <= 0 OR coalesce(b.telling, false))
),
compared AS MATERIALIZED (
    SELECT id, at, crowd, 1 - (embedding <=> CAST(:vector AS halfvec)) AS similarity
    FROM (
        SELECT id, {at} AS at, embedding, {crowd} AS crowd FROM {table}
        WHERE {scope} = :scope_id AND {where} AND embedding_space = :space{indexed}
        ORDER BY {at} DESC, id DESC LIMIT :meaning_sample
    ) AS newest
),
spread AS (
    SELECT avg(similarity) AS mean, coalesce(stddev_pop(similarity), 0) AS sd FROM compared
),
-- Hubness: a row as near to many of the scope's other rows as to the query (one of a crowd
-- of look-alike notes) says less than one that stands alone near it. Each row's similarity
-- loses :hub_weight × its stored crowd figure, its mean similarity to its nearest neighbours
-- in the scope (cross-domain similarity local scaling, CSLS), kept by the table's owner off
-- the read's path; a row without the figure yet loses nothing.
-- The nearest few are chosen first (a bounded sort), then numbered in the same order: the
-- places the whole sample's numbering would give them.
meaning AS (
    SELECT id, at, row_number() OVER (ORDER BY score DESC, at DESC, id DESC) AS place
    FROM (
        SELECT c.id, c.at, c.similarity - CAST(:hub_weight AS float8) * coalesce(c.crowd, 0)
            AS score
        FROM compared c, spread s
        WHERE c.similarity >= s.mean + :min_meaning * s.sd
        ORDER BY score DESC, c.at DESC, c.id DESC LIMIT :meaning_candidates
    ) AS nearest
),
best AS (
    SELECT id, max(at) AS at, max(relevance) AS relevance,
           sum(weight / (:fusion_k + place)) AS rank
    FROM (
        SELECT id, at, relevance, place,
               CASE WHEN relevance > 0 THEN CAST(:words_weight AS float8) ELSE 0 END AS weight
        FROM words
        UNION ALL
        SELECT id, at, 0, place, CAST(:meaning_weight AS float8) FROM meaning
    ) AS legs
    GROUP BY id
    ORDER BY rank DESC, at DESC, id DESC
    LIMIT :limit
)
"""

_TAIL = """
-- One row at least: with nothing relevant, the one row (all NULL but the flag) still says
-- whether the scope lacks tokens.
SELECT {columns}, best.relevance, status.tokens_missing
FROM (
    SELECT EXISTS (SELECT FROM {table} WHERE {scope} = :scope_id AND search_tokens IS NULL)
        AS tokens_missing
) AS status
LEFT JOIN (best JOIN {table} ON {table}.id = best.id) ON true
ORDER BY best.rank DESC, best.at DESC, best.id DESC
"""


# Both for this transaction, in one round trip. A prepared statement switches to a generic
# plan after five runs; planned without its scope, terms and limits this one is a hundred
# times slower: custom plans, always. Its only bitmap heap scans are the probes, each of which
# stops after :probe_rows rows: reading ahead (effective_io_concurrency pages beyond the
# current one) fetches pages the probe never looks at, about as many again when they are not
# in shared buffers (a long channel's older rows).
RANKED_READ_SETTINGS = text(
    "SELECT set_config('plan_cache_mode', 'force_custom_plan', true), "
    "set_config('effective_io_concurrency', '0', true)"
)


@lru_cache(maxsize=256)
def ranked_statement(
    table: SearchTable,
    where: str,
    *,
    hybrid: bool = False,
    indexed: bool = False,
    columns: tuple[str, ...] = (),
) -> TextClause:
    """The ranked read over ``table`` for one scope: its rows (``columns``, or all), their relevance
    and whether any row of the scope lacks its tokens, best first (one all-NULL row but the
    flag when none is relevant). ``hybrid``: by meaning too (``:vector`` in ``:space``);
    ``indexed``: the space's vectors are read from the table's covering index
    (``table.reads_index``), the same rows.

    ``where`` narrows the candidates (visibility, deletions, the window); its own bind
    parameters go with the call, together with ``ranked_parameters``."""
    best = _HYBRID_BEST if hybrid else _WORDS_BEST
    return text(
        (_HEAD + best + _TAIL).format(
            table=table.table,
            at=table.at,
            scope=table.scope,
            keys=table.keys,
            where=where,
            columns=", ".join(f"{table.table}.{c}" for c in columns) or f"{table.table}.*",
            crowd=table.crowd,
            indexed=f" AND {table.indexed}" if hybrid and indexed and table.indexed else "",
        )
    )


async def ranked(
    session: AsyncSession,
    table: SearchTable,
    model: type[Row],
    *,
    where: str,
    bind: dict[str, object],
    scope_id: int,
    query: Query,
    ranking: Ranking,
    limit: int,
    meaning: Embedding | None = None,
    fusion: Fusion = DEFAULT_FUSION,
) -> list[tuple[Row, float]]:
    """The best ``limit`` rows of one scope as ``model`` objects with their relevance, best
    first; by their words, and with ``meaning`` (the query's vector) by meaning too. Rows of
    the scope that lack their tokens get them, and the read runs again, so nothing written by
    hand is missed (one statement when nothing lacks them)."""
    await session.execute(RANKED_READ_SETTINGS)
    indexed = meaning is not None and table.reads_index(meaning)
    statement = _ranked_rows(table, model, where, meaning is not None, indexed)
    parameters = ranked_parameters(table, scope_id, query, ranking, limit) | bind
    if meaning is not None:
        parameters |= meaning_parameters(meaning, fusion)
    rows = (await session.execute(statement, parameters)).all()
    if rows[0].tokens_missing and await fill_missing(session, table, scope_id):
        rows = (await session.execute(statement, parameters)).all()
    return [(row[0], float(row.relevance)) for row in rows if row[0] is not None]


_DOCUMENT_FREQUENCIES = """
WITH sample AS MATERIALIZED (
    SELECT id, search_tokens AS tokens FROM {table}
    WHERE {scope} = :scope_id AND {where}
    ORDER BY {at} DESC, id DESC LIMIT :sample
)
SELECT NULL AS term, count(*)::float8 AS n FROM sample
UNION ALL
SELECT x.t, count(DISTINCT s.id)::float8
FROM sample s CROSS JOIN LATERAL unnest(s.tokens) AS x(t)
WHERE x.t = ANY(CAST(:terms AS text[]))
GROUP BY x.t
"""


def idf(n: float, df: float) -> float:
    """BM25's term weight: near 0 for a word in every candidate, highest for a new word."""
    return math.log(1 + (n - df + 0.5) / (df + 0.5))


async def term_weights(
    session: AsyncSession,
    table: SearchTable,
    *,
    where: str,
    scope_id: int,
    terms: Collection[str],
    ranking: Ranking = DEFAULT_RANKING,
) -> Callable[[str], float]:
    """Each word's weight over the same candidates a ranked read takes its statistics from
    (a word they never use weighs the most)."""
    statement = text(
        _DOCUMENT_FREQUENCIES.format(table=table.table, at=table.at, scope=table.scope, where=where)
    )
    bind = {"scope_id": scope_id, "terms": sorted(terms), "sample": ranking.sample}
    counts = dict((await session.execute(statement, bind)).tuples().all())
    n = counts.pop(None, 0.0)
    return lambda term: idf(n, counts.get(term, 0.0))


@lru_cache(maxsize=256)
def _ranked_rows(table: SearchTable, model: Any, where: str, hybrid: bool, indexed: bool) -> Any:
    """The ranked statement mapped onto ``model`` rows (built once: SQLAlchemy caches the
    compiled form of a statement it sees again). The model's deferred columns (a vector) are
    not read: nobody uses them, and each is kilobytes to send and decode."""
    loaded = tuple(
        prop.columns[0].name for prop in inspect(model).column_attrs if not prop.deferred
    )
    statement = ranked_statement(table, where, hybrid=hybrid, indexed=indexed, columns=loaded)
    return (
        select(model, column("relevance", Float), column("tokens_missing", Boolean))
        .from_statement(statement)
        .execution_options(populate_existing=True)
    )


def meaning_parameters(meaning: Embedding, fusion: Fusion) -> dict[str, object]:
    return {
        "vector": meaning.sql(),
        "space": meaning.space,
        "meaning_sample": fusion.sample,
        "meaning_candidates": fusion.candidates,
        "min_meaning": fusion.min_meaning,
        "fusion_k": fusion.k,
        "words_weight": fusion.words,
        "meaning_weight": fusion.meaning,
        "hub_weight": fusion.hub_weight,
    }


def ranked_parameters(
    table: SearchTable, scope_id: int, query: Query, ranking: Ranking, limit: int
) -> dict[str, object]:
    return {
        "terms": list(query.terms),
        "weights": list(query.weights),
        "scope_id": scope_id,
        "limit": limit,
        "k1": ranking.k1,
        "idf_power": ranking.idf_power,
        "b": ranking.b,
        "prior": ranking.prior,
        "prior_days": ranking.prior_days,
        "min_score": ranking.min_score,
        "min_telling": ranking.min_telling,
        "telling_from": ranking.telling_from,
        "sample": ranking.sample,
        "rare": ranking.rare,
        "probe_terms": ranking.probe_terms,
        "probe_rows": ranking.probe_rows,
    }


# --- the stored tokens' upkeep -------------------------------------------------------------

# A row whose `search_tokens` is NULL was written without them (by hand, an older release,
# or its text changed under a trigger that clears them): its owner fills them in before a
# ranked read. Only while the text is still the one the tokens were made from.
FILL_BATCH = 500


def missing_tokens_statement(table: str, scope: str) -> TextClause:
    """Rows of a scope that lack their tokens, locked in id order; rows another transaction
    is filling in are skipped, never waited for (two readers never deadlock on them)."""
    return text(
        f"SELECT id, content FROM {table} WHERE {scope} = :scope_id AND search_tokens IS NULL "
        "ORDER BY id LIMIT :limit FOR UPDATE SKIP LOCKED"
    )


def fill_statement(table: str) -> TextClause:
    return text(
        f"UPDATE {table} AS t SET search_tokens = v.tokens "
        "FROM jsonb_to_recordset(CAST(:rows AS jsonb)) "
        "AS v(id bigint, content text, tokens text[]) "
        "WHERE t.id = v.id AND t.content = v.content AND t.search_tokens IS NULL"
    )


def fill_payload(rows: Sequence[tuple[int, str]]) -> str:
    """The rows' tokens as the fill statement's one JSON parameter."""
    return json.dumps(
        [
            {"id": row_id, "content": content, "tokens": tokenize(content)}
            for row_id, content in rows
        ],
        ensure_ascii=False,
    )


async def fill_missing(session: AsyncSession, table: SearchTable, scope_id: int) -> int:
    """Tokens for up to FILL_BATCH rows of the scope that lack them; how many."""
    found = await session.execute(
        missing_tokens_statement(table.table, table.scope),
        {"scope_id": scope_id, "limit": FILL_BATCH},
    )
    rows = [(int(row_id), str(content)) for row_id, content in found.tuples()]
    if rows:
        await session.execute(fill_statement(table.table), {"rows": fill_payload(rows)})
    return len(rows)
