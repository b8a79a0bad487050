"""Each memory's stored crowd figure on real Postgres (app/memory/store/crowds.py, migration
0019): computed when a memory gets its vector, its neighbours put back to wait when a new vector
joins their nearest or one of their nearest goes (not while their owner's erasure deletes them
all, migration 0022), recomputed by the back-fill's step, cleared with the vector when the text
changes, and used by the meaning leg of recall."""

from __future__ import annotations

import math
import random
import struct

import pytest
from sqlalchemy import text

from app.channel.exchange import DM
from app.db import SessionFactory, unit_of_work
from app.kit.relevance import Query
from app.kit.vectors import Embedding
from app.memory import store
from app.memory.records import Why
from app.memory.store.crowds import CROWD_K, FEWER
from app.privacy import store as register
from app.privacy.store import RequestedBy
from app.vocabulary import Actor

ALICE, BOB = 11, 12
SPACE = "test-space"
WHY = Why(Actor.REPLY, "remember")
DIMENSIONS = 8


def unit(values: list[float]) -> tuple[float, ...]:
    norm = math.sqrt(sum(v * v for v in values))
    return tuple(v / norm for v in values)


def cosine(a: tuple[float, ...], b: tuple[float, ...]) -> float:
    return sum(x * y for x, y in zip(a, b, strict=True)) / math.sqrt(
        sum(x * x for x in a) * sum(y * y for y in b)
    )


def halved(v: tuple[float, ...]) -> tuple[float, ...]:
    """What halfvec keeps of a vector (the figures are taken over the stored values)."""
    return tuple(struct.unpack("e", struct.pack("e", x))[0] for x in v)


async def add(
    sessions: SessionFactory, content: str, vector: tuple[float, ...], owner: int = ALICE
) -> int:
    async with unit_of_work(sessions) as session:
        record = await store.add(
            session, owner, content, WHY, learned_in=DM, embedding=Embedding(vector, SPACE)
        )
    return record.id


async def figures(sessions: SessionFactory) -> dict[int, tuple[float | None, float | None]]:
    async with sessions() as session:
        rows = await session.execute(text("SELECT id, crowd, crowd_floor FROM memories"))
        return {int(i): (c, f) for i, c, f in rows.tuples()}


def expected(
    vectors: dict[int, tuple[float, ...]], row: int
) -> tuple[float, float]:  # (crowd, floor)
    near = sorted(
        (cosine(halved(vectors[row]), halved(v)) for i, v in vectors.items() if i != row),
        reverse=True,
    )[:CROWD_K]
    floor = min(near) if len(near) >= CROWD_K else FEWER
    return sum(near) / len(near), floor


async def refreshed(sessions: SessionFactory) -> int:
    done = 0
    while True:
        async with unit_of_work(sessions) as session:
            found = await store.refresh_crowds(session, limit=5)
        if not found:
            return done
        done += found


async def twelve_notes(
    sessions: SessionFactory, owner: int = ALICE, seed: int = 7
) -> dict[int, tuple[float, ...]]:
    rng = random.Random(seed)
    vectors: dict[int, tuple[float, ...]] = {}
    for n in range(12):
        v = unit([rng.gauss(0, 1) for _ in range(DIMENSIONS)])
        vectors[await add(sessions, f"note {n}", v, owner)] = v
    return vectors


async def test_a_new_vector_gets_its_figure_and_the_rows_it_joins_wait_for_theirs(
    sessions: SessionFactory,
) -> None:
    vectors = await twelve_notes(sessions)
    await refreshed(sessions)
    stored = await figures(sessions)
    for row in vectors:
        crowd, floor = expected(vectors, row)
        assert stored[row][0] == pytest.approx(crowd, abs=2e-3)
        assert stored[row][1] == pytest.approx(floor, abs=2e-3)

    # A note right beside the first: it is one of the first's nearest now.
    first = next(iter(vectors))
    near = unit([x + 0.01 for x in vectors[first]])
    new = await add(sessions, "note beside the first", near)
    vectors[new] = near
    stored = await figures(sessions)
    assert stored[new][0] == pytest.approx(expected(vectors, new)[0], abs=2e-3)
    assert stored[first][1] is None  # waits for the back-fill
    assert stored[first][0] is not None  # its old figure serves the reads meanwhile
    assert await refreshed(sessions) >= 1
    stored = await figures(sessions)
    assert stored[first][0] == pytest.approx(expected(vectors, first)[0], abs=2e-3)
    assert all(floor is not None for _, floor in stored.values())


async def test_with_fewer_than_k_others_every_new_vector_counts(sessions: SessionFactory) -> None:
    a = await add(sessions, "alone", unit([1.0] + [0.0] * (DIMENSIONS - 1)))
    assert (await figures(sessions))[a] == (0.0, FEWER)  # nobody to be crowded by
    await add(sessions, "far", unit([0.0, 1.0] + [0.0] * (DIMENSIONS - 2)))
    assert (await figures(sessions))[a][1] is None  # it had fewer than k: any vector joins


async def test_a_gone_neighbour_and_a_changed_text_send_rows_back_to_wait(
    sessions: SessionFactory,
) -> None:
    vectors = await twelve_notes(sessions)
    await refreshed(sessions)
    first, second = list(vectors)[:2]
    # The rows that counted the first among their ten nearest (all but those it was farthest
    # from).
    counted = {
        row
        for row in vectors
        if row != first
        and cosine(halved(vectors[row]), halved(vectors[first])) >= expected(vectors, row)[1]
    }
    assert len(counted) >= 5
    async with sessions() as session, session.begin():
        await session.execute(text("DELETE FROM memories WHERE id = :i"), {"i": first})
    del vectors[first]
    stored = await figures(sessions)
    assert {row for row, (_, floor) in stored.items() if floor is None} == counted
    await refreshed(sessions)
    stored = await figures(sessions)
    for row in vectors:
        assert stored[row][0] == pytest.approx(expected(vectors, row)[0], abs=2e-3)

    # A changed text loses its vector, and its figures with it (the trigger).
    async with sessions() as session, session.begin():
        await session.execute(
            text("UPDATE memories SET content = 'changed' WHERE id = :i"), {"i": second}
        )
    assert (await figures(sessions))[second] == (None, None)


async def test_her_erasure_sends_none_of_her_rows_back_to_wait_and_others_rows_as_before(
    sessions: SessionFactory,
) -> None:
    # Each of her deletes would otherwise pass over all her other vectors, for rows the same
    # erasure deletes next (minutes at 10⁴ memories).
    hers = await twelve_notes(sessions, ALICE)
    his = await twelve_notes(sessions, BOB, seed=8)
    await refreshed(sessions)
    assert all(floor is not None for _, floor in (await figures(sessions)).values())
    async with unit_of_work(sessions) as session:
        erasure, started = await register.start(session, ALICE, requested_by=RequestedBy.ADMIN)
    assert started

    async with unit_of_work(sessions) as session:  # her erasure's first batch, as it runs
        deleted, _ = await store.erase_batch(
            session, ALICE, Why(Actor.ADMIN, f"erasure {erasure.id}"), limit=4
        )
    stored = await figures(sessions)
    assert deleted == 4 and len(stored) == 20
    assert all(floor is not None for _, floor in stored.values())  # hers and his alike

    # Bob's own delete meanwhile sends his rows back to wait, as at any other time.
    gone = next(iter(his))
    async with sessions() as session, session.begin():
        await session.execute(text("DELETE FROM memories WHERE id = :i"), {"i": gone})
    stored = await figures(sessions)
    assert any(stored[row][1] is None for row in his if row != gone)
    assert all(stored[row][1] is not None for row in hers if row in stored)


async def test_the_meaning_leg_discounts_a_row_by_its_stored_figure(
    sessions: SessionFactory,
) -> None:
    """Two notes about as near the question: the one with the smaller crowd figure is the one
    read; swap the figures and the other is (the read takes the stored column)."""
    question = unit([1.0, 0.2] + [0.0] * (DIMENSIONS - 2))
    left = await add(sessions, "alpha", unit([1.0, 0.4] + [0.0] * (DIMENSIONS - 2)))
    right = await add(sessions, "beta", unit([1.0, 0.0] + [0.0] * (DIMENSIONS - 2)))

    async def best(crowd_left: float, crowd_right: float) -> list[str]:
        async with sessions() as session, session.begin():
            for row, crowd in ((left, crowd_left), (right, crowd_right)):
                await session.execute(
                    text("UPDATE memories SET crowd = :c WHERE id = :i"), {"c": crowd, "i": row}
                )
        async with unit_of_work(sessions) as session:
            found = await store.relevant(
                session,
                ALICE,
                WHY,
                query=Query.of([("gamma", 1.0)]),
                place=DM,
                meaning=Embedding(question, SPACE),
                limit=1,
            )
        return [m.content for m in found]

    assert await best(0.9, 0.1) == ["beta"]
    assert await best(0.1, 0.9) == ["alpha"]
