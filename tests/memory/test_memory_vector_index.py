"""The person's vectors in read order (migration 0021's covering index): recall by meaning can
read them from the index alone, finds the same memories either way, and a model whose vectors
are too long for a btree entry is still written and recalled, from the table; the rows come
back without their vectors."""

from __future__ import annotations

import random
from typing import Any

from sqlalchemy import event, text
from sqlalchemy.ext.asyncio import AsyncEngine

from app.channel.exchange import DM
from app.db import SessionFactory, unit_of_work
from app.kit.relevance import (
    Query,
    meaning_parameters,
    ranked,
    ranked_parameters,
    ranked_statement,
)
from app.kit.vectors import Embedding
from app.memory import store
from app.memory.records import Why
from app.models.memory import VECTOR_INDEX_DIMENSIONS, Memory
from app.vocabulary import Actor

ALICE = 11
WHY = Why(Actor.REPLY, "remember")
QUESTION = Query.of([("how was your weekend", 1.0)])  # shares no word with the notes


def random_vector(rng: random.Random, dimensions: int) -> tuple[float, ...]:
    return tuple(rng.gauss(0, 1) for _ in range(dimensions))


async def notes(sessions: SessionFactory, space: str, dimensions: int) -> dict[str, Embedding]:
    """Twelve notes of ``dimensions`` in ``space``, their vectors by text."""
    rng = random.Random(dimensions)
    written: dict[str, Embedding] = {}
    for n in range(12):
        content = f"note number {n} about topic {n}"
        vector = Embedding(random_vector(rng, dimensions), space)
        async with unit_of_work(sessions) as session:
            await store.add(session, ALICE, content, WHY, learned_in=DM, embedding=vector)
        written[content] = vector
    return written


async def recalled(sessions: SessionFactory, meaning: Embedding) -> list[str]:
    async with unit_of_work(sessions) as session:
        found = await store.relevant(
            session, ALICE, WHY, query=QUESTION, place=DM, limit=1, meaning=meaning
        )
    return [record.content for record in found]


async def ranked_ids(sessions: SessionFactory, meaning: Embedding, *, indexed: bool) -> list[int]:
    statement = ranked_statement(store.MEMORIES, "TRUE", hybrid=True, indexed=indexed)
    parameters = ranked_parameters(store.MEMORIES, ALICE, QUESTION, store.RANKING, 12)
    parameters |= meaning_parameters(meaning, store.FUSION)
    async with sessions() as session:
        rows = await session.execute(statement, parameters)
        return [int(row.id) for row in rows]


async def test_the_meaning_leg_reads_the_index_alone_and_finds_the_same(
    sessions: SessionFactory, engine: AsyncEngine
) -> None:
    space = "test-space@8/field"
    written = await notes(sessions, space, 8)
    target = "note number 7 about topic 7"
    assert await recalled(sessions, written[target]) == [target]

    # The same rows in the same order whichever way the vectors are read.
    for vector in written.values():
        assert await ranked_ids(sessions, vector, indexed=True) == await ranked_ids(
            sessions, vector, indexed=False
        )

    # The planner may take the index for the read (a dozen rows would not make it choose it
    # on its own: the table's other ways are switched off), and needs no table page for it.
    async with engine.connect() as conn:
        await conn.execution_options(isolation_level="AUTOCOMMIT")
        await conn.exec_driver_sql("VACUUM memories")  # the visibility map, as autovacuum
    statement = ranked_statement(store.MEMORIES, "TRUE", hybrid=True, indexed=True)
    parameters = ranked_parameters(store.MEMORIES, ALICE, QUESTION, store.RANKING, 10)
    parameters |= meaning_parameters(written[target], store.FUSION)
    async with sessions() as session, session.begin():
        for way in ("seqscan", "bitmapscan", "sort"):
            await session.execute(text(f"SET LOCAL enable_{way} = off"))
        explain = text("EXPLAIN (ANALYZE, COSTS OFF) " + statement.text)
        plan = "\n".join((await session.execute(explain, parameters)).scalars())
    assert "Index Only Scan using ix_memories_vectors" in plan
    assert "Heap Fetches: 0" in plan


async def test_the_longest_indexed_vectors_fit_and_longer_ones_are_read_from_the_table(
    sessions: SessionFactory,
) -> None:
    # The longest vectors the index keeps, with a long space name: their entries fit.
    longest = await notes(
        sessions, f"{'a-long-model-name/' * 4}@{VECTOR_INDEX_DIMENSIONS}/field:0123abcd", 1024
    )
    assert store.MEMORIES.reads_index(next(iter(longest.values())))
    # A model of 1536 dimensions: written without an index entry, recalled from the table.
    longer = await notes(sessions, "text-embedding-3-small@1536/field", 1536)
    vector = longer["note number 3 about topic 3"]
    assert not store.MEMORIES.reads_index(vector)
    assert await recalled(sessions, vector) == ["note number 3 about topic 3"]
    async with sessions() as session:
        in_index = await session.scalar(
            text(
                "SELECT count(*) FROM memories WHERE user_id = :user_id "
                "AND embedding IS NOT NULL AND vector_dims(embedding) <= 1024"
            ),
            {"user_id": ALICE},
        )
    assert in_index == 12


async def test_a_ranked_read_leaves_the_vectors_in_the_database(
    sessions: SessionFactory, engine: AsyncEngine
) -> None:
    # The rows come back without their vectors: nothing reads them, and each is kilobytes
    # to send and decode. What the server sends is what the cursor describes.
    written = await notes(sessions, "test-space@8/field", 8)
    sent: list[list[str]] = []

    def described(conn: object, cursor: Any, statement: str, *args: object) -> None:
        if "best.relevance" in statement:
            sent.append([column[0] for column in cursor.description])

    event.listen(engine.sync_engine, "after_cursor_execute", described)
    try:
        async with unit_of_work(sessions) as session:
            found = await ranked(
                session,
                store.MEMORIES,
                Memory,
                where="TRUE",
                bind={},
                scope_id=ALICE,
                query=QUESTION,
                ranking=store.RANKING,
                limit=3,
                meaning=next(iter(written.values())),
            )
            assert len(found) == 3 and all(row.content for row, _ in found)
    finally:
        event.remove(engine.sync_engine, "after_cursor_execute", described)
    assert sent and all("content" in columns for columns in sent)
    assert not any("embedding" in columns for columns in sent)
