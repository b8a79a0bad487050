"""Erasure (in bounded batches, by owner) and retention: what MEM-09 and MEM-06 remove or redact."""

from __future__ import annotations

import json
from collections.abc import Collection
from datetime import datetime
from typing import Any

from sqlalchemy import (
    delete,
    func,
    select,
    text,
    update,
)
from sqlalchemy.ext.asyncio import AsyncSession

from app.kit.sql import any_array, mention_pattern
from app.memory.records import (
    REDACTED,
    Why,
    encode,
)
from app.memory.store.rows import (
    _REDACT,
    _delete,
    _fresh,
    _log,
    _record,
    _redact,
    _redact_history,
    lock_owners,
)
from app.models.memory import (
    FED_A_REPLY,
    Memory,
    MemoryLog,
    MemoryReadCount,
    MemorySource,
)
from app.vocabulary import Action, Actor


async def erase_batch(
    session: AsyncSession, user_id: int, why: Why, *, limit: int
) -> tuple[int, int]:
    """Delete up to ``limit`` of the person's memories, each logged with its history's text
    redacted, and their sources; ``(memories deleted, ledger rows redacted)``, (0, 0) when
    none are left."""
    await lock_owners(session, [user_id])
    rows = await session.scalars(_fresh(Memory.user_id == user_id).limit(limit).with_for_update())
    records = [_record(row) for row in rows]
    if not records:
        return 0, 0
    ids = [r.id for r in records]
    redacted = await _redact_history(session, ids)
    await session.execute(delete(MemorySource).where(MemorySource.memory_id.in_(ids)))
    await _delete(session, records, why, redact=True)
    return len(records), redacted


async def redact_ledger_batch(
    session: AsyncSession, user_id: int, *, after_id: int, limit: int
) -> tuple[int | None, int]:
    """Redact the text of the person's next ``limit`` ledger rows after ``after_id``: they
    keep their ids, actor, action and time. ``(last id looked at or None when none are
    left, rows redacted)``."""
    batch = (
        select(MemoryLog.id)
        .where(MemoryLog.user_id == user_id, MemoryLog.id > after_id)
        .order_by(MemoryLog.id)
        .limit(limit)
        .subquery()
    )
    last = await session.scalar(select(func.max(batch.c.id)))
    if last is None:
        return None, 0
    scope = "user_id = :user_id AND id > :after AND id <= :last"
    args: dict[str, object] = {"user_id": user_id, "after": after_id, "last": int(last)}
    return int(last), await _redact(session, scope, args)


async def reply_reads(
    session: AsyncSession, user_id: int, *, after_id: int, limit: int
) -> list[tuple[int, str]]:
    """(ledger id, trigger) of the reply prompts that read the person's memories and found
    some, oldest first: the turns whose replies held them."""
    rows = await session.execute(
        select(MemoryLog.id, MemoryLog.trigger)
        .where(
            MemoryLog.user_id == user_id,
            MemoryLog.action == Action.READ,
            text(FED_A_REPLY),
            MemoryLog.id > after_id,
        )
        .order_by(MemoryLog.id)
        .limit(limit)
    )
    return [(int(i), str(t)) for i, t in rows.tuples()]


async def learned_from(session: AsyncSession, message_ids: Collection[int]) -> list[int]:
    """The memories learned from these messages (their recorded sources)."""
    if not message_ids:
        return []
    rows = await session.scalars(
        select(MemorySource.memory_id)
        .where(MemorySource.message_id == any_array(message_ids))
        .distinct()
    )
    return list(rows)


async def replace_mentions(
    session: AsyncSession, memory_ids: Collection[int], user_id: int, token: str, why: Why
) -> int:
    """In these memories (someone else's, learned from a message that mentioned the erased
    person), the mention is replaced by ``token``, in the text and in its ledger history;
    each change logged. Nothing else of the text changes."""
    pattern = mention_pattern(user_id)
    owners = await session.scalars(
        select(Memory.user_id).where(Memory.id == any_array(memory_ids)).distinct()
    )
    await lock_owners(session, owners)
    rows = await session.scalars(
        _fresh(Memory.id == any_array(memory_ids), Memory.content.regexp_match(pattern))
        .order_by(Memory.id)
        .with_for_update()
    )
    changed = 0
    for row in rows:
        row_after = await session.scalar(
            update(Memory)
            .where(Memory.id == row.id)
            .values(content=func.regexp_replace(Memory.content, pattern, token, "g"))
            .returning(Memory)
            .execution_options(populate_existing=True)
        )
        assert row_after is not None
        await session.execute(
            _REPLACE_IN_HISTORY, {"id": row.id, "pattern": pattern, "token": token}
        )
        after = _record(row_after)
        # The text before held the mention: the row says a change happened, not from what.
        await _log(
            session, why, Action.UPDATE, after.user_id, after.id, dict(REDACTED), encode(after)
        )
        changed += 1
    return changed


_REPLACE_IN_HISTORY = text(
    """
    UPDATE memory_log SET
        before = CAST(regexp_replace(CAST(before AS text), :pattern, :token, 'g') AS jsonb),
        after = CAST(regexp_replace(CAST(after AS text), :pattern, :token, 'g') AS jsonb)
    WHERE memory_id = :id AND action <> 'read'
    """
)


async def record_erasure(session: AsyncSession, user_id: int, why: Why, receipt: Any) -> None:
    """The erasure's receipt row: counts only, keyed by the person's id."""
    await _log(session, why, Action.DELETE, user_id, None, None, receipt)


async def erased_users(session: AsyncSession) -> set[int]:
    """Everyone who was ever erased (their receipt rows stay, keyed by id)."""
    rows = await session.scalars(
        select(MemoryLog.user_id).where(MemoryLog.actor == Actor.FORGETME).distinct()
    )
    return set(rows)


async def purge_expired(
    session: AsyncSession, *, cutoff: datetime, why: Why, limit: int
) -> list[int]:
    """Delete memories not updated since ``cutoff`` (oldest first, at most ``limit``), each
    logged; the ids deleted, ascending."""
    candidates = (
        await session.execute(
            select(Memory.id, Memory.user_id)
            .where(Memory.updated_at < cutoff)
            .order_by(Memory.updated_at, Memory.id)
            .limit(limit)
        )
    ).all()
    if not candidates:
        return []
    await lock_owners(session, {user_id for _, user_id in candidates})
    # Re-checked under the locks: a memory refreshed meanwhile is no longer expired.
    rows = await session.scalars(
        _fresh(
            Memory.id.in_([memory_id for memory_id, _ in candidates]), Memory.updated_at < cutoff
        )
        .order_by(Memory.id)
        .with_for_update()
    )
    records = [_record(row) for row in rows]
    # Durable is not indefinite (MEM-06): the ledger keeps that it happened, not the text.
    await _delete(session, records, why, redact=True)
    return [record.id for record in records]


async def redact_content_before(session: AsyncSession, cutoff: datetime) -> set[int]:
    """Ledger content retention: rows older than ``cutoff`` keep their ids, actor, action,
    run and time, but no memory text. The runs whose rows lost their text (they can no longer
    be rolled back)."""
    statement = text(_REDACT.format(scope="created_at < :cutoff") + " RETURNING run_id")
    result = await session.execute(statement, {"marker": json.dumps(REDACTED), "cutoff": cutoff})
    return {run_id for (run_id,) in result if run_id is not None}


async def forget_read_counts(session: AsyncSession, user_id: int) -> int:
    """The person's folded read counts (``LEDGER_READ_ROLLUP_DAYS``), deleted by owner: an
    erasure leaves no row keyed by them in that table. The number of rows."""
    result = await session.execute(
        delete(MemoryReadCount)
        .where(MemoryReadCount.user_id == user_id)
        .returning(MemoryReadCount.user_id)
    )
    return len(result.all())
