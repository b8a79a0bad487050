"""Benchmark relevance recall (MEMORY_RECALL=relevant) against the seed's newest ten
(`recent`), both measured in the same run.

    python -m bench.recall [--rows 1000000] [--reads 300] [--tune]
                           [--skip-quality] [--skip-scale] [--reuse-scale]

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
   in a channel of 10⁶ messages, p50/p95 as the turn calls them, against the `recent` reads.
4. The write path's extra cost: store.add_distinct (the near-duplicate check) against
   store.add, for that person and for one with a couple of hundred memories."""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import math
import os
import random
import time
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta

import asyncpg
from sqlalchemy import text

from app.channel import store as channel_log
from app.channel.exchange import Place
from app.db import SessionFactory, create_engine, create_session_factory, unit_of_work
from app.kit.relevance import (
    Query,
    Ranking,
    SearchTable,
    idf,
    ranked_parameters,
    ranked_statement,
)
from app.kit.tokens import token_set, tokenize
from app.memory import duplicates, store
from app.memory.recall import CONTEXT_WEIGHT, recall_query
from app.memory.records import Why
from app.vocabulary import Actor
from bench._rig import Summary, asyncpg_dsn, bench_db, database_url, fresh_database
from bench.recall_set import HALVES, ConversationSet, Pair, Question, generate

DB = bench_db("_recall")
GUILD = 500
PLACE = Place(GUILD)
RECENT_MESSAGES = channel_log.CONTEXT_SIZE
OLDER_MESSAGES = 10  # MEMORY_RECALL_MESSAGES's default
WHY = Why(Actor.REPLY, "recall")
SEED = 22


@dataclass(frozen=True)
class Knobs:
    """What the tuning may change; the shipped values are the defaults."""

    memories: Ranking = store.RANKING
    messages: Ranking = channel_log.RANKING
    context_weight: float = CONTEXT_WEIGHT


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


async def reached(
    sessions: SessionFactory, q: Question, note_ids: list[int], relevant: bool, knobs: Knobs
) -> bool:
    """Whether the question's evidence reaches its reply prompt, as the turn builds it: the
    asker's ten memories, or the last 20 messages (the question the newest) and, with
    relevance recall, up to ten older ones."""
    async with unit_of_work(sessions) as session:
        recent = await channel_log.recent_messages(session, q.channel, limit=RECENT_MESSAGES - 1)
        weight = knobs.context_weight
        query = recall_query(q.text, [m.content for m in recent], context_weight=weight)
        if q.memory is not None:
            if relevant:
                notes = await store.relevant(
                    session, q.asker, WHY, query=query, place=PLACE, ranking=knobs.memories
                )
            else:
                notes = await store.recent(session, q.asker, WHY, place=PLACE)
            return note_ids[q.memory] in {n.id for n in notes}
        shown = [*recent]
        if relevant:
            shown += await channel_log.older_relevant(
                session,
                q.channel,
                before=recent[0],
                query=query,
                limit=OLDER_MESSAGES,
                ranking=knobs.messages,
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
    relevant: bool,
    knobs: Knobs = SHIPPED,
) -> dict[tuple[str, str], Tally]:
    """Per (language, kind of question) and per (language, "all")."""
    tallies: dict[tuple[str, str], Tally] = {}
    for q in questions:
        hit = await reached(sessions, q, note_ids, relevant, knobs)
        kinds = ["all", "memory" if q.memory is not None else "message"]
        if not q.lexical:
            kinds.append("no shared word")
        for kind in kinds:
            tallies.setdefault((q.language, kind), Tally()).add(hit)
    return tallies


def overall(tallies: dict[tuple[str, str], Tally]) -> float:
    hits = sum(t.hits for (_, kind), t in tallies.items() if kind == "all")
    total = sum(t.total for (_, kind), t in tallies.items() if kind == "all")
    return hits / total


async def quality(
    sessions: SessionFactory, halves: dict[str, tuple[ConversationSet, list[int]]]
) -> None:
    print("\n1. evidence recall (the share of questions whose evidence reaches the prompt;")
    print(
        f"   {store.RECENT_LIMIT} memories per person, "
        f"{RECENT_MESSAGES} + {OLDER_MESSAGES} messages)"
    )
    print(
        f"   {'half':<9} {'language':<9} {'questions':<28} {'n':>4}  {'recent':>7}  {'relevant':>8}"
    )
    for half, (made, ids) in halves.items():
        seed = await evidence_recall(sessions, made.questions, ids, relevant=False)
        ours = await evidence_recall(sessions, made.questions, ids, relevant=True)
        for key in sorted(ours, key=lambda k: (k[0], k[1] != "all", k[1])):
            language, kind = key
            print(
                f"   {half:<9} {language:<9} {kind:<28} {ours[key].total:>4}  "
                f"{seed[key].share:>7.2f}  {ours[key].share:>8.2f}"
            )
        print(
            f"   {half:<9} {'both':<9} {'all':<28} {'':>4}  "
            f"{overall(seed):>7.2f}  {overall(ours):>8.2f}"
        )


async def tune(sessions: SessionFactory, made: ConversationSet, ids: list[int]) -> None:
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
        tallies = await evidence_recall(sessions, about_memories, ids, True, knobs)
        rows.append((overall(tallies), f"{weight} {prior} {days:.0f} {power}", knobs == SHIPPED))
    _best(rows)
    print("   older-message questions: min_telling, rare, idf power → evidence recall")
    rows = []
    for telling, rare, power in itertools.product((0.3, 0.4, 0.5), (0.002, 0.01), (1.0, 2.0)):
        ranking = replace(channel_log.RANKING, min_telling=telling, rare=rare, idf_power=power)
        knobs = replace(SHIPPED, messages=ranking)
        tallies = await evidence_recall(sessions, about_messages, ids, True, knobs)
        rows.append((overall(tallies), f"{telling} {rare} {power}", knobs == SHIPPED))
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
    sessions: SessionFactory, made: ConversationSet, ids: list[int]
) -> dict[str, Tally]:
    """Through store.add_distinct, rolled back: did the new text merge into the old note?"""
    by_text = {(n.person, n.text): ids[i] for i, n in enumerate(made.notes)}
    tallies: dict[str, Tally] = {}
    for pair in made.pairs:
        async with sessions() as session:
            await session.begin()
            written = await store.add_distinct(
                session, pair.person, pair.new, Why(Actor.EXTRACTION, "bench"), learned_in=PLACE
            )
            await session.rollback()
        merged = (
            written.duplicate is not None and written.record.id == by_text[(pair.person, pair.old)]
        )
        tallies.setdefault(_kind(pair), Tally()).add(
            merged if pair.duplicate else written.duplicate is not None
        )
    return tallies


async def near_duplicates(
    sessions: SessionFactory, halves: dict[str, tuple[ConversationSet, list[int]]], tuning: bool
) -> None:
    print(
        f"\n2. near-duplicates (threshold {duplicates.THRESHOLD}): share merged, through "
        "store.add_distinct (a repeat should merge into its note, a distinct fact never)"
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
        for kind, tally in sorted((await store_judgement(sessions, made, ids)).items()):
            print(f"   {half:<9} {kind:<34} n={tally.total:<4} merged {tally.share:.2f}")


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
_LOAD_MEMORIES = f"""
    INSERT INTO memories (user_id, content, search_tokens, created_at, updated_at)
    SELECT CASE WHEN i % 100 = 0 THEN {PERSON} ELSE 10000 + i % 5000 END,
           array_to_string(w, ' '), w, now() - interval '400 days',
           now() - make_interval(secs => random() * 31536000)
    FROM (SELECT i, {_WORDS.format(length="5 + i % 12")} AS w
          FROM generate_series(1, $1::bigint) AS i) AS rows
"""
_LOAD_MESSAGES = f"""
    INSERT INTO messages (id, channel_id, guild_id, author_id, author_name, is_bot, content,
                          search_tokens, created_at, deleted_at)
    SELECT 10^12 + i, {CHANNEL}, {GUILD}, 20000 + i % 50, 'user ' || i % 50, i % 10 = 0,
           array_to_string(w, ' '), w, now() - make_interval(secs => ($1 - i) * 60),
           CASE WHEN i % 50 = 7 THEN now() END
    FROM (SELECT i, {_WORDS.format(length="3 + i % 23")} AS w
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


Read = Callable[[SessionFactory, Query], Awaitable[object]]


def reads(before: channel_log.LoggedMessage) -> list[tuple[str, Read, Read]]:
    """(name, the recent read, the relevant read), each as the turn calls it."""

    async def memories_recent(sessions: SessionFactory, query: Query) -> object:
        async with unit_of_work(sessions) as session:
            return await store.recent(session, PERSON, WHY, place=PLACE)

    async def memories_relevant(sessions: SessionFactory, query: Query) -> object:
        async with unit_of_work(sessions) as session:
            return await store.relevant(session, PERSON, WHY, query=query, place=PLACE)

    async def context(sessions: SessionFactory, query: Query) -> object:
        async with sessions() as session:
            return await channel_log.recent_messages(session, CHANNEL)

    async def older(sessions: SessionFactory, query: Query) -> object:
        async with unit_of_work(sessions) as session:
            return await channel_log.older_relevant(
                session, CHANNEL, before=before, query=query, limit=OLDER_MESSAGES
            )

    return [
        ("memory recall, 10⁴ of 10⁶ memories", memories_recent, memories_relevant),
        ("channel of 10⁶ messages: the last 20 / older", context, older),
    ]


def queries(rng: random.Random, count: int) -> list[Query]:
    """A message of 4–14 words and the three lines before it, as the reply path asks."""
    return [
        recall_query(
            sentence(rng, rng.randint(4, 14)), [sentence(rng, rng.randint(3, 12)) for _ in range(3)]
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
        for name, seed_read, our_read in reads(before):
            for read in (seed_read, our_read):
                for query in queries(rng, args.warmup):
                    await read(sessions, query)
            for query in queries(rng, args.reads):  # interleaved: drift falls on both alike
                for way, read in (("recent", seed_read), ("relevant", our_read)):
                    started = time.perf_counter()
                    await read(sessions, query)
                    samples.setdefault((name, way), []).append(time.perf_counter() - started)
        for name, _, _ in reads(before):
            seed_s, ours = Summary(samples[(name, "recent")]), Summary(samples[(name, "relevant")])
            against(name, ("recent", seed_s), ("relevant", ours))
        await explain(sessions, before, rng, max(10, args.reads // 5))
        await write_cost(sessions, rng, args)
    finally:
        await engine.dispose()
        await conn.close()


async def explain(
    sessions: SessionFactory, before: channel_log.LoggedMessage, rng: random.Random, count: int
) -> None:
    """Postgres's own execution time of the ranked statements (EXPLAIN ANALYZE, without the
    client, the loopback and the session's other statements), and whether the scoped GIN
    index serves their probes."""
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
    for table, where, bind, scope, ranking, index in plans:
        statement = text("EXPLAIN (ANALYZE, FORMAT JSON) " + ranked_statement(table, where).text)
        times, used = [], False
        for query in queries(rng, count):
            parameters = ranked_parameters(table, scope, query, ranking, 10) | bind
            async with sessions() as session:
                plan = (await session.execute(statement, parameters)).scalar_one()
            plan = json.loads(plan) if isinstance(plan, str) else plan
            times.append(float(plan[0]["Execution Time"]) / 1000)
            used = used or index in json.dumps(plan)
        print(Summary(times).line(f"   {table.table} ranked statement in Postgres", 50))
        print(f"     {index} serves its probes: {'yes' if used else 'no probe was needed'}")


async def write_cost(
    sessions: SessionFactory, rng: random.Random, args: argparse.Namespace
) -> None:
    print(
        "\n4. the write path's extra cost: store.add_distinct (near-duplicate check) "
        "against store.add"
    )
    for person, label in ((PERSON, "10⁴ memories"), (SMALL_PERSON, "~200 memories")):
        times: dict[str, list[float]] = {"add": [], "add_distinct": []}
        for n in range(args.warmup + args.reads // 3):
            content = sentence(rng, rng.randint(5, 16))
            for name, write in (("add", store.add), ("add_distinct", store.add_distinct)):
                async with sessions() as session:
                    await session.begin()
                    started = time.perf_counter()
                    await write(
                        session, person, content, Why(Actor.EXTRACTION, "bench"), learned_in=PLACE
                    )
                    await session.flush()
                    elapsed = time.perf_counter() - started
                    await session.rollback()
                if n >= args.warmup:
                    times[name].append(elapsed)
        plain, checked = Summary(times["add"]), Summary(times["add_distinct"])
        against(f"a person with {label}", ("add", plain), ("add_distinct", checked))


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
    args = parser.parse_args()
    load_avg = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    print(f"cores={os.cpu_count()} load average {load_avg}")
    if not args.skip_quality:
        await quality_and_duplicates(args)
    if not args.skip_scale:
        await scale(args)


async def quality_and_duplicates(args: argparse.Namespace) -> None:
    url = await fresh_database(DB)
    conn = await asyncpg.connect(asyncpg_dsn(DB))
    engine = create_engine(url, pool_size=2)
    sessions = create_session_factory(engine)
    try:
        halves = {}
        for n, half in enumerate(HALVES):
            made = generate(half, seed=SEED)
            halves[half] = (made, await load_set(conn, made, first_id=1 + n * 1_000_000))
            print(
                f"{half} half: {len(made.languages)} people, {len(made.notes):,} memories, "
                f"{len(made.messages):,} messages over 180 days, {len(made.questions)} questions, "
                f"{len(made.pairs)} near-duplicate pairs"
            )
        await conn.execute(
            "SELECT setval(pg_get_serial_sequence('memories', 'id'), "
            "(SELECT max(id) FROM memories))"
        )
        await conn.execute("VACUUM ANALYZE")
        await quality(sessions, halves)
        if args.tune:
            await tune(sessions, *halves["tuning"])
        await near_duplicates(sessions, halves, args.tune)
    finally:
        await engine.dispose()
        await conn.close()


if __name__ == "__main__":
    asyncio.run(main())
