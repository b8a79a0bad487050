"""The pure rollback planner: every branch, over plain ledger rows and current rows."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from app.memory.records import UNKNOWN, LogEntry, MemoryRecord
from app.memory.rollback import (
    DeleteOp,
    ReinsertOp,
    RestoreOp,
    Skip,
    plan_rollback,
)
from app.vocabulary import SkipReason

ALICE, BOB = 11, 22
T0 = datetime(2026, 1, 1, tzinfo=UTC)
T1 = datetime(2026, 2, 1, tzinfo=UTC)


def snap(memory_id: int, content: str, user_id: int = ALICE, **extra: Any) -> dict[str, Any]:
    return {
        "id": memory_id,
        "user_id": str(user_id),
        "content": content,
        "source": extra.get("source", "self"),
        "created_at": extra.get("created_at", T0).isoformat(),
        "updated_at": extra.get("updated_at", T0).isoformat(),
    }


def add(log_id: int, memory_id: int, content: str) -> LogEntry:
    return LogEntry(log_id, memory_id, ALICE, "add", None, snap(memory_id, content))


def upd(log_id: int, memory_id: int, before: str, after: str) -> LogEntry:
    return LogEntry(
        log_id,
        memory_id,
        ALICE,
        "update",
        snap(memory_id, before),
        snap(memory_id, after, updated_at=T1),
    )


def dele(log_id: int, memory_id: int, content: str, **extra: Any) -> LogEntry:
    return LogEntry(log_id, memory_id, ALICE, "delete", snap(memory_id, content, **extra), None)


def now(memory_id: int, content: str, user_id: int = ALICE) -> MemoryRecord:
    return MemoryRecord(memory_id, user_id, content, "self", T0, T1)


def test_an_unchanged_add_is_deleted() -> None:
    plan = plan_rollback([add(1, 5, "likes tea")], {5: now(5, "likes tea")})

    assert plan.ops == [DeleteOp(now(5, "likes tea"))]
    assert plan.deleted == [5]
    assert plan.skipped == []


def test_an_add_edited_after_the_run_is_skipped() -> None:
    plan = plan_rollback([add(1, 5, "likes tea")], {5: now(5, "likes green tea")})

    assert plan.ops == []
    assert plan.skipped == [Skip(5, "add", SkipReason.CHANGED)]


def test_an_add_forgotten_after_the_run_is_skipped_not_resurrected() -> None:
    plan = plan_rollback([add(1, 5, "likes tea")], {})

    assert plan.ops == []
    assert plan.skipped == [Skip(5, "add", SkipReason.DELETED)]


def test_an_unchanged_update_is_restored_with_its_before_content_and_time() -> None:
    plan = plan_rollback([upd(1, 5, "likes tea", "likes coffee")], {5: now(5, "likes coffee")})

    assert plan.restored == [5]
    op = plan.ops[0]
    assert isinstance(op, RestoreOp)
    assert op.restored.content == "likes tea"
    assert op.restored.updated_at == T0


def test_an_update_changed_again_is_skipped() -> None:
    plan = plan_rollback([upd(1, 5, "likes tea", "likes coffee")], {5: now(5, "likes cocoa")})

    assert plan.ops == []
    assert plan.skipped == [Skip(5, "update", SkipReason.CHANGED)]


def test_an_update_forgotten_after_the_run_is_skipped() -> None:
    plan = plan_rollback([upd(1, 5, "likes tea", "likes coffee")], {})

    assert plan.skipped == [Skip(5, "update", SkipReason.DELETED)]


def test_a_delete_is_reinserted_with_its_original_id_and_times() -> None:
    plan = plan_rollback([dele(1, 5, "has a cat", source="operator", updated_at=T1)], {})

    # The before state predates origins: it comes back private (its owner's DMs only).
    restored = MemoryRecord(5, ALICE, "has a cat", "operator", T0, T1, UNKNOWN)
    assert plan.ops == [ReinsertOp(restored)]
    assert plan.reinserted == [5]


def test_a_delete_whose_id_is_taken_again_is_skipped() -> None:
    plan = plan_rollback([dele(1, 5, "has a cat")], {5: now(5, "something else")})

    assert plan.skipped == [Skip(5, "delete", SkipReason.ID_TAKEN)]


def test_changes_are_undone_newest_first_through_the_same_record() -> None:
    log = [add(1, 5, "v1"), upd(2, 5, "v1", "v2"), upd(3, 5, "v2", "v3")]

    plan = plan_rollback(log, {5: now(5, "v3")})

    assert [type(op) for op in plan.ops] == [RestoreOp, RestoreOp, DeleteOp]
    assert plan.deleted == [5]
    assert plan.skipped == []


def test_a_later_change_protects_every_older_change_of_the_record() -> None:
    # The run wrote v1 then v2; later someone wrote v1 again. Undoing the older update
    # would match v1 by accident and overwrite the later change.
    log = [upd(1, 5, "v0", "v1"), upd(2, 5, "v1", "v2")]

    plan = plan_rollback(log, {5: now(5, "v1")})

    assert plan.ops == []
    assert [s.action for s in plan.skipped] == ["update", "update"]


def test_an_add_then_delete_in_the_same_run_ends_absent() -> None:
    plan = plan_rollback([add(1, 5, "v1"), dele(2, 5, "v1")], {})

    assert [type(op) for op in plan.ops] == [ReinsertOp, DeleteOp]


def test_reads_and_earlier_rollbacks_are_not_replayed() -> None:
    read = LogEntry(1, None, ALICE, "read", None, None)
    other = LogEntry(2, 5, ALICE, "rollback", None, snap(5, "x"))

    plan = plan_rollback([read, other], {})

    assert plan.ops == [] and plan.skipped == []


def test_another_owner_at_the_same_id_is_never_touched() -> None:
    plan = plan_rollback([add(1, 5, "likes tea")], {5: now(5, "likes tea", user_id=BOB)})

    assert plan.ops == []
    assert plan.skipped[0].reason == SkipReason.CHANGED


def test_a_delete_whose_ledger_row_was_erased_is_not_reinserted() -> None:
    # `!forgetme` redacts the user's ledger rows: nothing of theirs may come back.
    erased = LogEntry(1, 5, ALICE, "delete", {"redacted": True}, None)

    plan = plan_rollback([erased], {})

    assert plan.ops == []
    assert plan.skipped == [Skip(5, "delete", SkipReason.NO_BEFORE)]
