"""A big profile in a few statements (INSERT … SELECT generate_series, never the ORM): memories,
ledger reads spread over 2024, ledger changes of a chosen size; and the files the Discord fake
received by DM."""

from __future__ import annotations

from collections import Counter
from typing import Any

from sqlalchemy import text

from app.db import SessionFactory
from tests.support.trust_env import World

READERS = ("reply", "extraction", "nightly")


async def seed_memories(
    sessions: SessionFactory, user_id: int, count: int, *, text_of: str = "remembered fact number"
) -> list[int]:
    """``count`` memories, one statement, memory n reading "<text_of> n about this person";
    their ids."""
    async with sessions() as session, session.begin():
        rows = await session.execute(
            text(
                """
                INSERT INTO memories (user_id, content, updated_at)
                SELECT :user_id, :text_of || ' ' || n || ' about this person',
                       now() - make_interval(mins => n)
                FROM generate_series(1, :count) AS n
                RETURNING id
                """
            ),
            {"user_id": user_id, "count": count, "text_of": text_of},
        )
        return sorted(int(i) for (i,) in rows)


async def seed_reads(sessions: SessionFactory, user_id: int, count: int) -> None:
    """``count`` read rows in one INSERT … SELECT: row n read by READERS[n % 3] in month
    n % 12 of 2024, listing ten ids."""
    async with sessions() as session, session.begin():
        await session.execute(
            text(
                """
                INSERT INTO memory_log (user_id, actor, action, reason, after, created_at)
                SELECT :user_id, (CAST(:readers AS text[]))[1 + n % 3], 'read', 'reply prompt',
                       '[1, 2, 3, 4, 5, 6, 7, 8, 9, 10]'::jsonb,
                       timestamptz '2024-01-10 12:00+00' + make_interval(months => n % 12)
                FROM generate_series(1, :count) AS n
                """
            ),
            {"user_id": user_id, "count": count, "readers": list(READERS)},
        )


def expected_reads(count: int) -> Counter[tuple[str, str]]:
    return Counter((READERS[n % 3], f"2024-{1 + n % 12:02d}") for n in range(1, count + 1))


async def seed_changes(
    sessions: SessionFactory, user_id: int, memory_ids: list[int], count: int, chars: int
) -> list[int]:
    """``count`` update rows in one statement, before and after each ``chars`` long."""
    async with sessions() as session, session.begin():
        rows = await session.execute(
            text(
                """
                INSERT INTO memory_log (memory_id, user_id, actor, action, reason, before, after)
                SELECT (CAST(:ids AS bigint[]))[1 + n % cardinality(CAST(:ids AS bigint[]))],
                       :user_id, 'extraction', 'update', 'write path',
                       jsonb_build_object('content', n || repeat('b', :chars)),
                       jsonb_build_object('content', n || repeat('a', :chars))
                FROM generate_series(1, :count) AS n
                RETURNING id
                """
            ),
            {"user_id": user_id, "ids": memory_ids, "count": count, "chars": chars},
        )
        return sorted(int(i) for (i,) in rows)


def attachments(world: World, user_id: int) -> list[tuple[dict[str, Any], bytes]]:
    """Every file DMed to ``user_id``, in order, with its message."""
    fake = world.stack.discord
    return [
        (dm, fake.attachment(dm, a["filename"]))
        for dm in fake.dms_to(user_id)
        for a in dm["attachments"]
    ]
