"""Relevance ranking in SQL, shared by the owners of `memories` and `messages`.

A query is a set of tokens with weights (the triggering message counts fully, the lines
around it less). Each candidate row is scored with BM25 over its stored `search_tokens`,
term weights taken over the candidates themselves (a word in every one of them weighs
nothing), plus a small recency prior; ties go to the newer row.

The statistics come from the newest ``sample`` candidates, which are all of them for any
profile or channel of ordinary size. A larger scope is still searched whole for its rare
words: rows older than the sample that contain one of them join the candidates through the
GIN index, which is keyed by scope (a marker token per person or channel) so that a word
common elsewhere costs nothing here. Everything is bounded: the sample, the probed words and
the rows each probe may bring."""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass

from sqlalchemy import TextClause, text
from sqlalchemy.ext.asyncio import AsyncSession

from app.kit.tokens import tokenize

MAX_QUERY_TERMS = 64


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
    prior: float = 1.0  # weight of the recency prior, at most this much for a new row
    prior_days: float = 60.0  # the prior halves about every 0.7 × this many days
    min_score: float = 0.0  # rows scoring less are not relevant (0: keep every row)
    # With a share above 0, a row is relevant only if it holds a query word at least this
    # telling: weight × idf ≥ share × the idf of a word no candidate has. Scale-free, unlike
    # a bare score floor (idf grows with the number of candidates).
    min_telling: float = 0.0
    sample: int = 2000  # candidates the statistics are taken over (the newest)
    rare: float = 0.02  # a word in at most this share of the sample is probed for
    probe_terms: int = 12  # at most this many rare words probed beyond the sample
    probe_rows: int = 300  # rows each probe may bring


DEFAULT_RANKING = Ranking()


@dataclass(frozen=True, slots=True)
class SearchTable:
    """Where a ranked read runs: the table, its time column and its scope column; the
    index expression it probes is ``search_keys(marker, scope)``."""

    table: str
    at: str
    scope: str
    marker: str  # the scope marker's prefix: "@" + user id, "#" + channel id


def search_keys(marker: str, scope: str) -> str:
    """The GIN index's expression: the tokens plus one marker naming the scope. Tokens never
    hold ``@`` or ``#``, so the marker cannot collide with a word."""
    return f"array_append(search_tokens, '{marker}'::text || ({scope})::text)"


def scope_marker(table: SearchTable, scope_id: int) -> str:
    return f"{table.marker}{scope_id}"


_RANKED = """
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
    SELECT s.id, x.t AS term, count(*)::float8 AS tf
    FROM sample s CROSS JOIN LATERAL unnest(s.tokens) AS x(t) JOIN q ON q.term = x.t
    GROUP BY s.id, x.t
),
df AS (
    SELECT q.term, q.weight, count(h.id)::float8 AS df
    FROM q LEFT JOIN sample_hits h ON h.term = q.term GROUP BY q.term, q.weight
),
weights AS (
    SELECT term, df, weight * ln(1 + (n - df + 0.5) / (df + 0.5)) AS w,
           weight * ln(1 + (n - df + 0.5) / (df + 0.5))
               >= :min_telling * ln(1 + (n + 0.5) / 0.5) AS telling
    FROM df, stats
),
rare AS (
    SELECT term FROM weights, stats
    WHERE n >= :sample AND df <= :rare * n ORDER BY df, term LIMIT :probe_terms
),
extra AS MATERIALIZED (
    SELECT DISTINCT m.id, m.at, m.tokens
    FROM rare r CROSS JOIN oldest o CROSS JOIN LATERAL (
        SELECT id, {at} AS at, search_tokens AS tokens FROM {table}
        WHERE {keys} @> ARRAY[CAST(:marker AS text), r.term]
          AND {where} AND ({at}, id) < (o.at, o.id)
        LIMIT :probe_rows
    ) AS m
),
extra_hits AS (
    SELECT e.id, x.t AS term, count(*)::float8 AS tf
    FROM extra e CROSS JOIN LATERAL unnest(e.tokens) AS x(t) JOIN q ON q.term = x.t
    GROUP BY e.id, x.t
),
candidates AS (
    SELECT id, at, cardinality(tokens) AS dl FROM sample
    UNION ALL SELECT id, at, cardinality(tokens) FROM extra
),
bm25 AS (
    SELECT h.id, bool_or(w.telling) AS telling, sum(
        w.w * h.tf * (:k1 + 1)
        / (h.tf + :k1 * (1 - :b + :b * c.dl / greatest(st.avgdl, 1)))
    ) AS score
    FROM (SELECT * FROM sample_hits UNION ALL SELECT * FROM extra_hits) AS h
    JOIN weights w ON w.term = h.term JOIN candidates c ON c.id = h.id CROSS JOIN stats st
    GROUP BY h.id
)
SELECT c.id, coalesce(b.score, 0) AS relevance
FROM candidates c LEFT JOIN bm25 b ON b.id = c.id
WHERE coalesce(b.score, 0) >= :min_score AND (:min_telling <= 0 OR coalesce(b.telling, false))
ORDER BY coalesce(b.score, 0)
         + :prior * exp(-greatest(extract(epoch FROM now() - c.at), 0) / (86400 * :prior_days))
         DESC, c.at DESC, c.id DESC
LIMIT :limit
"""


def ranked_statement(table: SearchTable, where: str) -> TextClause:
    """The ranked read over ``table`` for one scope: (id, relevance) rows, best first.

    ``where`` narrows the candidates (visibility, deletions, the window); its own bind
    parameters go with the call, together with ``ranked_parameters``."""
    keys = search_keys(table.marker, table.scope)
    return text(
        _RANKED.format(table=table.table, at=table.at, scope=table.scope, keys=keys, where=where)
    )


async def ranked_ids(
    session: AsyncSession,
    table: SearchTable,
    *,
    where: str,
    bind: dict[str, object],
    scope_id: int,
    query: Query,
    ranking: Ranking,
    limit: int,
) -> list[tuple[int, float]]:
    """(id, relevance) of the best ``limit`` rows of one scope, best first. The scope's rows
    that lack their tokens get them first, so nothing written by hand is missed."""
    await fill_missing(session, table, scope_id)
    statement = ranked_statement(table, where)
    parameters = ranked_parameters(table, scope_id, query, ranking, limit) | bind
    rows = await session.execute(statement, parameters)
    return [(int(row_id), float(relevance)) for row_id, relevance in rows.tuples()]


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


def ranked_parameters(
    table: SearchTable, scope_id: int, query: Query, ranking: Ranking, limit: int
) -> dict[str, object]:
    return {
        "terms": list(query.terms),
        "weights": list(query.weights),
        "scope_id": scope_id,
        "marker": scope_marker(table, scope_id),
        "limit": limit,
        "k1": ranking.k1,
        "b": ranking.b,
        "prior": ranking.prior,
        "prior_days": ranking.prior_days,
        "min_score": ranking.min_score,
        "min_telling": ranking.min_telling,
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
    return text(
        f"SELECT id, content FROM {table} WHERE {scope} = :scope_id AND search_tokens IS NULL "
        "ORDER BY id LIMIT :limit"
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
