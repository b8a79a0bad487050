"""Rolling back a nightly run on real Postgres: every branch, the ledger, the style override,
the run marker, dry runs and repeats, and a property test against random later edits."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from datetime import UTC, date, datetime

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import select, text

from app.db import SessionFactory, unit_of_work
from app.kit.locks import try_xact_lock
from app.memory import store
from app.memory.records import Why
from app.memory.rollback import AlreadyRolledBack, RunNotFound, rollback_run
from app.models import Base
from app.models.memory import Memory, MemoryLog
from app.models.nightly import NightlyRun, StyleOverride
from app.nightly.store import RUN_LOCK
from app.vocabulary import Actor, SkipReason
from tests.support.waiting import someone_awaits_an_advisory_lock, wait_until

ALICE, BOB = 11, 22
OLD = datetime(2026, 1, 1, tzinfo=UTC)


async def new_run(sessions: SessionFactory, day: date = date(2026, 3, 1)) -> int:
    async with unit_of_work(sessions) as session:
        run = NightlyRun(day=day, status="finished", summary={})
        session.add(run)
        await session.flush()
        return run.id


async def seed(sessions: SessionFactory, user_id: int, content: str, source: str = "self") -> int:
    async with unit_of_work(sessions) as session:
        memory = Memory(
            user_id=user_id, content=content, source=source, created_at=OLD, updated_at=OLD
        )
        session.add(memory)
        await session.flush()
        return memory.id


async def change(
    sessions: SessionFactory,
    action: str,
    user_id: int,
    *,
    memory_id: int | None = None,
    content: str = "",
    actor: Actor = Actor.NIGHTLY,
    run_id: int | None = None,
) -> int:
    """One logged change, exactly as the write path, decay or a command make it: through
    the memory store."""
    reason = "decay" if action == "delete" and actor is Actor.NIGHTLY else "test"
    why = Why(actor, reason, run_id=run_id)
    async with unit_of_work(sessions) as session:
        if action == "add":
            return (await store.add(session, user_id, content, why, learned_in=None)).id
        assert memory_id is not None
        if action == "update":
            [current] = await store.by_ids(session, [memory_id], Why(actor, "test read"))
            assert await store.rewrite(session, current, content, why, learned_in=None) is not None
        else:
            assert await store.delete_one(session, memory_id, why, owner=user_id) is not None
        return memory_id


async def rows(sessions: SessionFactory) -> dict[int, tuple[int, str, str, datetime, datetime]]:
    async with sessions() as session:
        found = await session.scalars(select(Memory))
        return {m.id: (m.user_id, m.content, m.source, m.created_at, m.updated_at) for m in found}


async def contents(sessions: SessionFactory) -> dict[int, str]:
    return {k: v[1] for k, v in (await rows(sessions)).items()}


async def test_rollback_undoes_adds_updates_and_decay_deletes(sessions: SessionFactory) -> None:
    kept = await seed(sessions, ALICE, "Alice likes tea.")
    decayed = await seed(sessions, BOB, "Bob has an exam on Friday.", source="operator")
    before = await rows(sessions)
    run = await new_run(sessions)
    added = await change(sessions, "add", ALICE, content="Alice moved to Osaka.", run_id=run)
    await change(
        sessions, "update", ALICE, memory_id=kept, content="Alice likes coffee.", run_id=run
    )
    await change(sessions, "delete", BOB, memory_id=decayed, run_id=run)

    result = await rollback_run(sessions, run, dry_run=False)

    assert (result.plan.deleted, result.plan.restored, result.plan.reinserted) == (
        [added],
        [kept],
        [decayed],
    )
    assert result.plan.skipped == []
    # Same ids, contents, owners, sources and timestamps as before the run.
    assert await rows(sessions) == before


async def test_rollback_is_logged_and_marks_the_run(sessions: SessionFactory) -> None:
    memory = await seed(sessions, ALICE, "Alice likes tea.")
    run = await new_run(sessions)
    await change(
        sessions, "update", ALICE, memory_id=memory, content="Alice likes coffee.", run_id=run
    )
    async with unit_of_work(sessions) as session:
        session.add(StyleOverride(content="Be formal.", run_id=run))

    await rollback_run(sessions, run, dry_run=False)

    async with sessions() as session:
        log = list(await session.scalars(select(MemoryLog).where(MemoryLog.action == "rollback")))
        marked = await session.get(NightlyRun, run)
        style = await session.scalar(select(StyleOverride))
    assert [(r.memory_id, r.actor, r.run_id, r.user_id) for r in log] == [
        (memory, "nightly", run, ALICE)
    ]
    assert log[0].before is not None and log[0].before["content"] == "Alice likes coffee."
    assert log[0].after is not None and log[0].after["content"] == "Alice likes tea."
    assert marked is not None and marked.rolled_back_at is not None
    assert style is not None and style.reverted_at is not None


async def test_a_record_edited_after_the_run_is_skipped_and_keeps_the_edit(
    sessions: SessionFactory,
) -> None:
    memory = await seed(sessions, ALICE, "Alice likes tea.")
    run = await new_run(sessions)
    await change(
        sessions, "update", ALICE, memory_id=memory, content="Alice likes coffee.", run_id=run
    )
    await change(
        sessions,
        "update",
        ALICE,
        memory_id=memory,
        content="Alice likes cocoa.",
        actor=Actor.EXTRACTION,
    )

    result = await rollback_run(sessions, run, dry_run=False)

    assert result.plan.restored == []
    assert [(s.memory_id, s.action) for s in result.plan.skipped] == [(memory, "update")]
    assert await contents(sessions) == {memory: "Alice likes cocoa."}


async def test_a_memory_forgotten_after_the_run_is_not_resurrected(
    sessions: SessionFactory,
) -> None:
    run = await new_run(sessions)
    added = await change(sessions, "add", ALICE, content="Alice moved to Osaka.", run_id=run)
    updated = await seed(sessions, ALICE, "Alice likes tea.")
    await change(
        sessions, "update", ALICE, memory_id=updated, content="Alice likes coffee.", run_id=run
    )
    for memory_id in (added, updated):  # `!memory forget <id>` for both
        await change(sessions, "delete", ALICE, memory_id=memory_id, actor=Actor.COMMAND)

    result = await rollback_run(sessions, run, dry_run=False)

    assert result.plan.deleted == [] and result.plan.restored == []
    assert {s.reason for s in result.plan.skipped} == {SkipReason.FORGOTTEN_BY_OWNER}
    assert await contents(sessions) == {}


async def test_a_dry_run_reports_the_plan_and_changes_nothing(sessions: SessionFactory) -> None:
    memory = await seed(sessions, ALICE, "Alice likes tea.")
    run = await new_run(sessions)
    added = await change(sessions, "add", BOB, content="Bob plays chess.", run_id=run)
    await change(sessions, "delete", ALICE, memory_id=memory, run_id=run)
    async with unit_of_work(sessions) as session:
        session.add(StyleOverride(content="Be formal.", run_id=run))
    before = await rows(sessions)

    result = await rollback_run(sessions, run, dry_run=True)

    assert result.dry_run
    assert (result.plan.deleted, result.plan.reinserted) == ([added], [memory])
    assert await rows(sessions) == before
    async with sessions() as session:
        marked = await session.get(NightlyRun, run)
        style = await session.scalar(select(StyleOverride))
        rolled = await session.scalar(select(MemoryLog).where(MemoryLog.action == "rollback"))
    assert marked is not None and marked.rolled_back_at is None
    assert style is not None and style.reverted_at is None
    assert rolled is None


async def test_a_repeat_is_refused_dry_run_included(sessions: SessionFactory) -> None:
    run = await new_run(sessions)
    await rollback_run(sessions, run, dry_run=False)

    for dry_run in (False, True):
        with pytest.raises(AlreadyRolledBack) as refused:
            await rollback_run(sessions, run, dry_run=dry_run)
        assert refused.value.run_id == run


async def test_no_run_id_means_the_latest_run(sessions: SessionFactory) -> None:
    first = await new_run(sessions, date(2026, 3, 1))
    latest = await new_run(sessions, date(2026, 3, 2))

    result = await rollback_run(sessions, None, dry_run=True)

    assert result.run_id == latest != first


async def test_unknown_runs_are_not_found(sessions: SessionFactory) -> None:
    with pytest.raises(RunNotFound):
        await rollback_run(sessions, None, dry_run=False)
    await new_run(sessions)
    with pytest.raises(RunNotFound):
        await rollback_run(sessions, 999, dry_run=False)


async def test_new_memories_after_a_reinsert_get_fresh_ids(sessions: SessionFactory) -> None:
    memory = await seed(sessions, ALICE, "Alice likes tea.")
    run = await new_run(sessions)
    await change(sessions, "delete", ALICE, memory_id=memory, run_id=run)
    await rollback_run(sessions, run, dry_run=False)

    fresh = await change(sessions, "add", ALICE, content="Alice has a dog.")

    assert fresh != memory
    assert set(await contents(sessions)) == {memory, fresh}


# --- the property ------------------------------------------------------------------------

USERS = (ALICE, BOB)
Op = tuple[str, int, int]  # (action, user index, target index)
ops = st.tuples(st.sampled_from(["add", "update", "delete"]), st.integers(0, 1), st.integers(0, 9))


@dataclass
class World:
    counter: int = 0
    later: set[int] = field(default_factory=set)

    def text(self) -> str:
        self.counter += 1
        return f"fact #{self.counter}"


async def apply_ops(
    sessions: SessionFactory, world: World, plan: list[Op], *, actor: Actor, run_id: int | None
) -> set[int]:
    """Apply random changes; returns the ids touched. Targets pick among existing rows."""
    touched: set[int] = set()
    for action, user_index, target in plan:
        user = USERS[user_index]
        current = sorted(k for k, v in (await rows(sessions)).items() if v[0] == user)
        if action == "add" or not current:
            memory_id = await change(
                sessions, "add", user, content=world.text(), actor=actor, run_id=run_id
            )
        else:
            memory_id = current[target % len(current)]
            content = world.text() if action == "update" else ""
            await change(
                sessions,
                action,
                user,
                memory_id=memory_id,
                content=content,
                actor=actor,
                run_id=run_id,
            )
        touched.add(memory_id)
    return touched


async def reset(sessions: SessionFactory) -> None:
    tables = ", ".join(f'"{t.name}"' for t in Base.metadata.sorted_tables)
    async with sessions() as session, session.begin():
        await session.execute(text(f"TRUNCATE {tables} RESTART IDENTITY CASCADE"))


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    initial=st.lists(st.integers(0, 1), min_size=0, max_size=5),
    night=st.lists(ops, min_size=1, max_size=8),
    later=st.lists(ops, min_size=0, max_size=5),
)
async def test_rollback_never_overwrites_a_later_change_and_restores_the_rest(
    sessions: SessionFactory, initial: list[int], night: list[Op], later: list[Op]
) -> None:
    await reset(sessions)
    world = World()
    for user_index in initial:
        await seed(sessions, USERS[user_index], world.text())
    before_run = await contents(sessions)
    run = await new_run(sessions)
    await apply_ops(sessions, world, night, actor=Actor.NIGHTLY, run_id=run)
    changed_later = await apply_ops(sessions, world, later, actor=Actor.EXTRACTION, run_id=None)
    after_edits = await contents(sessions)

    await rollback_run(sessions, run, dry_run=False)
    final = await contents(sessions)

    # Anything changed after the run is exactly as the later change left it.
    for memory_id in changed_later:
        assert final.get(memory_id) == after_edits.get(memory_id)
    # Everything else is back to how it was before the run (present or absent).
    everything = set(before_run) | set(after_edits) | set(final)
    for memory_id in everything - changed_later:
        assert final.get(memory_id) == before_run.get(memory_id)


async def test_a_rollback_waits_for_the_runs_step_in_progress(sessions: SessionFactory) -> None:
    run = await new_run(sessions)
    added = await change(sessions, "add", ALICE, content="Alice moved to Osaka.", run_id=run)
    async with sessions() as step, step.begin():
        assert await try_xact_lock(step, RUN_LOCK, run)  # what a running nightly step holds
        undo = asyncio.create_task(rollback_run(sessions, run, dry_run=False))
        await wait_until(
            lambda: someone_awaits_an_advisory_lock(sessions), within=10, what="the lock wait"
        )
        assert not undo.done()
        assert await contents(sessions) == {added: "Alice moved to Osaka."}
    result = await undo

    assert result.plan.deleted == [added]
    assert await contents(sessions) == {}
