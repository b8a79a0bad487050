"""The store's changes: add, rewrite, the near-duplicate-aware add and rewrite, delete, forget,
each under the owner's lock with its ledger row."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from sqlalchemy import (
    func,
    insert,
    select,
    update,
)
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.ext.asyncio import AsyncSession

from app.channel.exchange import Place
from app.kit.tokens import tokenize
from app.kit.vectors import Embedding
from app.memory.duplicates import Duplicate
from app.memory.records import (
    MemoryRecord,
    Origin,
    SourceMessage,
    Why,
    encode,
)
from app.memory.store import crowds
from app.memory.store.rows import (
    _delete,
    _duplicate_of,
    _fresh,
    _log,
    _origin_values,
    _record,
    lock_owners,
)
from app.models.memory import (
    Memory,
    MemorySource,
)
from app.vocabulary import Action


def unchanged(current: MemoryRecord | None, expected: MemoryRecord) -> bool:
    """The record is exactly as it was read (same text, untouched since)."""
    return (
        current is not None
        and current.user_id == expected.user_id
        and current.content == expected.content
        and current.updated_at == expected.updated_at
    )


async def _locked_current(
    session: AsyncSession, memory_id: int, owner: int | None = None
) -> MemoryRecord | None:
    """The row fresh from the database and locked, with its owner's lock held; None when it
    does not exist (or is not ``owner``'s)."""
    if owner is None:
        owner = await session.scalar(select(Memory.user_id).where(Memory.id == memory_id))
        if owner is None:
            return None
    await lock_owners(session, [owner])
    row = await session.scalar(
        _fresh(Memory.id == memory_id, Memory.user_id == owner).with_for_update()
    )
    return _record(row) if row is not None else None


async def add(
    session: AsyncSession,
    user_id: int,
    content: str,
    why: Why,
    *,
    learned_in: Place | None,
    sources: Sequence[SourceMessage] = (),
    source: str = "self",
    embedding: Embedding | None = None,
) -> MemoryRecord:
    """A new memory with the origin of the place it was learned in and links to the
    messages it was learned from (and its text's ``embedding`` when already made)."""
    await lock_owners(session, [user_id])
    origin = Origin.learned_in(learned_in)
    row = await session.scalar(
        insert(Memory)
        .values(
            user_id=user_id,
            content=content,
            source=source,
            search_tokens=tokenize(content),
            **_origin_values(origin),
            **_embedding_values(embedding),
        )
        .returning(Memory)
        .execution_options(populate_existing=True)
    )
    assert row is not None
    record = _record(row)
    if embedding is not None:
        await crowds.settle(session, [record.id])
    await _link_sources(session, record.id, sources, why.trigger)
    await _log(session, why, Action.ADD, user_id, record.id, None, encode(record))
    return record


def _embedding_values(embedding: Embedding | None) -> dict[str, object]:
    """The vector columns for a text's ``embedding``; none without one (a changed text then
    loses its old vector to the trigger, and the back-fill makes the new one)."""
    if embedding is None:
        return {}
    return {"embedding": list(embedding.values), "embedding_space": embedding.space}


async def _link_sources(
    session: AsyncSession, memory_id: int, sources: Sequence[SourceMessage], trigger: str | None
) -> None:
    if not sources:
        return
    await session.execute(
        pg_insert(MemorySource)
        .values(
            [
                {
                    "memory_id": memory_id,
                    "message_id": s.message_id,
                    "channel_id": s.channel_id,
                    "guild_id": s.guild_id,
                    "trigger": trigger,
                }
                for s in sources
            ]
        )
        .on_conflict_do_nothing()
    )


async def rewrite(
    session: AsyncSession,
    expected: MemoryRecord,
    content: str,
    why: Why,
    *,
    learned_in: Place | None,
    sources: Sequence[SourceMessage] = (),
    embedding: Embedding | None = None,
) -> MemoryRecord | None:
    """Rewrite the text (and touch updated_at) only if the record is still as ``expected``;
    None when it changed or went since (the later change wins). What was learned in
    ``learned_in`` narrows the origin, never widens it. ``embedding``: the new text's."""
    current = await _locked_current(session, expected.id, expected.user_id)
    if current is None or not unchanged(current, expected):
        return None
    origin = current.origin.narrowed_by(learned_in)
    row = await session.scalar(
        update(Memory)
        .where(Memory.id == expected.id)
        .values(
            content=content,
            search_tokens=tokenize(content),
            updated_at=func.now(),
            reviewed_at=None,
            **_origin_values(origin),
            **_embedding_values(embedding if content != current.content else None),
        )
        .returning(Memory)
        .execution_options(populate_existing=True)
    )
    assert row is not None
    record = _record(row)
    if embedding is not None and content != current.content:
        await crowds.settle(session, [record.id])
    await _link_sources(session, record.id, sources, why.trigger)
    await _log(
        session, why, Action.UPDATE, record.user_id, record.id, encode(current), encode(record)
    )
    return record


@dataclass(frozen=True, slots=True)
class Written:
    """What an add or a rewrite became after the near-duplicate check: ``record`` holds the
    text now; ``duplicate`` names the existing memory that took it instead of a new row (or
    of a copy), and ``folded`` is a rewritten memory deleted because it would repeat it."""

    record: MemoryRecord
    duplicate: Duplicate | None = None
    folded: MemoryRecord | None = None


async def add_distinct(
    session: AsyncSession,
    user_id: int,
    content: str,
    why: Why,
    *,
    learned_in: Place | None,
    sources: Sequence[SourceMessage] = (),
    embedding: Embedding | None = None,
) -> Written:
    """``add``, unless a memory visible where it was learned already says the same: that one
    is updated with the new text instead (or refreshed, when the new text adds nothing)."""
    await lock_owners(session, [user_id])
    duplicate = await _duplicate_of(session, user_id, content, learned_in, exclude=None)
    if duplicate is None:
        added = await add(
            session,
            user_id,
            content,
            why,
            learned_in=learned_in,
            sources=sources,
            embedding=embedding,
        )
        return Written(added)
    reason = f"{why.reason}: {duplicate.reason()}, kept instead of adding"
    merged = await _merge(
        session, duplicate, content, replace(why, reason=reason), learned_in, sources, embedding
    )
    return Written(merged, duplicate)


async def rewrite_distinct(
    session: AsyncSession,
    expected: MemoryRecord,
    content: str,
    why: Why,
    *,
    learned_in: Place | None,
    sources: Sequence[SourceMessage] = (),
    embedding: Embedding | None = None,
) -> Written | None:
    """``rewrite``, unless the new text repeats another memory visible there: that one takes
    the text and this one, which would only copy it, is deleted. None when ``expected``
    changed or went since it was read."""
    current = await _locked_current(session, expected.id, expected.user_id)
    if current is None or not unchanged(current, expected):
        return None
    duplicate = await _duplicate_of(session, current.user_id, content, learned_in, current.id)
    if duplicate is None:
        done = await rewrite(
            session,
            current,
            content,
            why,
            learned_in=learned_in,
            sources=sources,
            embedding=embedding,
        )
        return Written(done) if done is not None else None
    kept = f"{why.reason}: {duplicate.reason()}, kept instead of rewriting {current.id}"
    merged = await _merge(
        session, duplicate, content, replace(why, reason=kept), learned_in, sources, embedding
    )
    folded = f"{why.reason}: folded into memory {duplicate.memory_id} ({duplicate.kind})"
    await _delete(session, [current], replace(why, reason=folded), redact=False)
    return Written(merged, duplicate, folded=current)


async def _merge(
    session: AsyncSession,
    duplicate: Duplicate,
    content: str,
    why: Why,
    learned_in: Place | None,
    sources: Sequence[SourceMessage],
    embedding: Embedding | None = None,
) -> MemoryRecord:
    """The existing memory takes the new text (keeps its own when the new one adds nothing,
    and is refreshed): one logged update, its sources joined by the new ones."""
    current = await _locked_current(session, duplicate.memory_id)
    assert current is not None  # found under the owner's lock, which is still held
    text = current.content if duplicate.kind.adds_nothing else content
    done = await rewrite(
        session, current, text, why, learned_in=learned_in, sources=sources, embedding=embedding
    )
    assert done is not None
    return done


async def delete_one(
    session: AsyncSession,
    memory_id: int,
    why: Why,
    *,
    owner: int | None = None,
    expected: MemoryRecord | None = None,
    visible_in: Place | None = None,
    redact: bool = False,
) -> MemoryRecord | None:
    """Delete one memory and log it; None when it is gone, is not ``owner``'s, may not
    surface in ``visible_in``, or changed since ``expected``. The ledger keeps the before
    state unless ``redact``."""
    if owner is None and expected is not None:
        owner = expected.user_id
    current = await _locked_current(session, memory_id, owner)
    if current is None or (visible_in is not None and not current.origin.visible_in(visible_in)):
        return None
    if expected is not None and not unchanged(current, expected):
        return None
    await _delete(session, [current], why, redact=redact)
    return current


async def delete_owned_by(
    session: AsyncSession, user_id: int, why: Why, *, redact: bool = False
) -> list[MemoryRecord]:
    """Delete every memory the person has, each logged; ascending ids."""
    await lock_owners(session, [user_id])
    rows = await session.scalars(_fresh(Memory.user_id == user_id).order_by(Memory.id))
    records = [_record(row) for row in rows]
    await _delete(session, records, why, redact=redact)
    return records


async def forget_everything(session: AsyncSession, user_id: int, why: Why) -> list[MemoryRecord]:
    """`!memory forget all`: every memory deleted and logged, and one row for the person
    (memory_id null) saying they asked, even when nothing was left to delete, so no later
    rollback restores a memory of theirs that an earlier night had removed."""
    gone = await delete_owned_by(session, user_id, why)
    await _log(session, why, Action.DELETE, user_id, None, None, {"forgot_all": len(gone)})
    return gone
