"""MEM-06: with a retention window, memories not updated within it are purged by the nightly
run — logged as deletes (actor `retention`, before state, run id) and undone by its rollback."""

from __future__ import annotations

from datetime import date, datetime, timedelta

from app.db import SessionFactory, unit_of_work
from app.kit.clock import utcnow
from app.memory.rollback import rollback_run
from app.models.nightly import NightlyRun
from app.structured.retention import purge_expired
from app.vocabulary import SkipReason
from tests.support.memory_env import add_memory, all_memories, ledger_rows, memories_of

ALICE, BOB = 11, 22


async def new_run(sessions: SessionFactory) -> int:
    async with unit_of_work(sessions) as session:
        run = NightlyRun(day=date(2026, 11, 29), status="running", summary={})
        session.add(run)
        await session.flush()
        return run.id


async def purge(
    sessions: SessionFactory, *, days: int, run_id: int | None, now: datetime, limit: int = 1000
) -> list[int]:
    async with unit_of_work(sessions) as session:
        return await purge_expired(
            session, retention_days=days, run_id=run_id, now=now, limit=limit
        )


async def test_mem06_purge_deletes_only_memories_not_updated_within_the_window(
    sessions: SessionFactory,
) -> None:
    expired = await add_memory(sessions, ALICE, "Was planning a trip to Oslo", age_days=181)
    inside = await add_memory(sessions, ALICE, "Prefers tea over coffee", age_days=179)
    fresh = await add_memory(sessions, BOB, "Started learning Rust", age_days=0)
    bobs_old = await add_memory(sessions, BOB, "Had a cold", age_days=400)

    purged = await purge(sessions, days=180, run_id=await new_run(sessions), now=utcnow())

    assert purged == sorted([expired, bobs_old])
    assert {m.id for m in await all_memories(sessions)} == {inside, fresh}


async def test_mem06_each_purge_is_logged_with_actor_retention_and_run_id_but_no_text(
    sessions: SessionFactory,
) -> None:
    expired = await add_memory(sessions, ALICE, "Was planning a trip to Oslo", age_days=200)
    run_id = await new_run(sessions)

    await purge(sessions, days=180, run_id=run_id, now=utcnow())

    [row] = await ledger_rows(sessions)
    assert (row.action, row.actor, row.memory_id, row.user_id, row.run_id) == (
        "delete",
        "retention",
        expired,
        ALICE,
        run_id,
    )
    assert row.before == {"redacted": True} and row.after is None


async def test_mem06_the_nights_rollback_never_brings_back_a_purged_memory(
    sessions: SessionFactory,
) -> None:
    expired = await add_memory(sessions, ALICE, "Was planning a trip to Oslo", age_days=200)
    run_id = await new_run(sessions)
    await purge(sessions, days=180, run_id=run_id, now=utcnow())
    assert await memories_of(sessions, ALICE) == {}

    result = await rollback_run(sessions, run_id, dry_run=False)

    assert result.plan.reinserted == []
    assert [(s.memory_id, s.reason) for s in result.plan.skipped] == [(expired, SkipReason.EXPIRED)]
    assert await memories_of(sessions, ALICE) == {}


async def test_mem06_the_cap_purges_the_oldest_first_and_leaves_the_rest_for_tomorrow(
    sessions: SessionFactory,
) -> None:
    oldest = await add_memory(sessions, ALICE, "a", age_days=300)
    older = await add_memory(sessions, BOB, "b", age_days=250)
    old = await add_memory(sessions, ALICE, "c", age_days=200)
    now = utcnow()

    assert await purge(sessions, days=180, run_id=None, now=now, limit=2) == [oldest, older]
    assert await purge(sessions, days=180, run_id=None, now=now, limit=2) == [old]
    assert await purge(sessions, days=180, run_id=None, now=now, limit=2) == []


async def test_mem06_nothing_expired_means_no_deletes_and_no_ledger_rows(
    sessions: SessionFactory,
) -> None:
    await add_memory(sessions, ALICE, "Prefers tea", age_days=10)

    assert await purge(sessions, days=30, run_id=None, now=utcnow()) == []
    assert await purge(sessions, days=30, run_id=None, now=utcnow() + timedelta(days=19)) == []
    assert await ledger_rows(sessions) == []
    assert await purge(sessions, days=30, run_id=None, now=utcnow() + timedelta(days=21)) != []
