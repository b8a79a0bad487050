"""LEDGER_READ_ROLLUP_DAYS: old ledger reads fold into counts per person, actor and month and
leave the ledger, exports (through the real webhook and worker) still report every one of
them, changes and a reply's reads that found memories stay rows, and an erasure still finds
the replies those memories went into. Off by default: seed 000 keeps everything."""

from __future__ import annotations

import json
from collections import Counter
from datetime import timedelta
from typing import Any

from sqlalchemy import text

from app.config import RecallScope, Settings
from app.db import SessionFactory
from app.kit.clock import utcnow
from app.memory.ledger_retention import ROLLUP_BATCH, roll_up_old_reads
from tests.support.ledger import (
    attachments,
    expected_reads,
    seed_changes,
    seed_memories,
    seed_reads,
)
from tests.support.trust_env import ALICE, BOB, World, reply_holding_her_memory, trust_world

OLD_READS = 2 * ROLLUP_BATCH + 1_234  # more than one batch


async def ledger(sessions: SessionFactory, user_id: int) -> Counter[tuple[str, str]]:
    """The person's ledger rows by action and actor."""
    async with sessions() as session:
        rows = await session.execute(
            text("SELECT action, actor FROM memory_log WHERE user_id = :u"), {"u": user_id}
        )
        return Counter((action, actor) for action, actor in rows.tuples())


async def seed_reply_reads(sessions: SessionFactory, user_id: int, found: bool, n: int) -> None:
    """``n`` old reply-prompt reads, each of its own turn, that found memories or none."""
    async with sessions() as session, session.begin():
        await session.execute(
            text(
                """
                INSERT INTO memory_log (user_id, actor, action, reason, after, trigger,
                                        created_at)
                SELECT :u, 'reply', 'read', 'reply prompt', CAST(:after AS jsonb),
                       'turn:' || (900000 + k), timestamptz '2024-03-05 12:00+00'
                FROM generate_series(1, :n) AS k
                """
            ),
            {"u": user_id, "after": "[1, 2]" if found else "[]", "n": n},
        )


async def export_reads(world: World) -> Counter[tuple[str, str]]:
    """The reads the newest export DMed to Alice reports, per actor and month."""
    *_, (_, raw) = attachments(world, ALICE)
    counted = json.loads(raw)["reads"]["by_actor_and_month"]
    return Counter({(c["actor"], c["month"]): c["reads"] for c in counted})


async def test_old_reads_fold_into_counts_and_the_export_still_reports_every_one(
    world: World, sessions: SessionFactory
) -> None:
    memories = await seed_memories(sessions, ALICE, 10)
    await seed_changes(sessions, ALICE, memories, 40, chars=20)
    await seed_reads(sessions, ALICE, OLD_READS)  # in 2024
    await seed_reply_reads(sessions, ALICE, found=True, n=7)
    await seed_reply_reads(sessions, ALICE, found=False, n=5)
    await seed_reads(sessions, BOB, 300)
    await world.tell(ALICE, "!memory export", mention=False)
    before = await export_reads(world)

    folded = await roll_up_old_reads(sessions, days=30, now=utcnow())

    assert folded == OLD_READS + 5 + 300
    left = await ledger(sessions, ALICE)
    assert left == {
        ("update", "extraction"): 40,  # changes are never folded
        ("read", "reply"): 7,  # a reply's read that found memories: an erasure needs it
        ("read", "command"): 1,  # the export's own read, from today
    }
    await world.tell(ALICE, "!memory export", mention=False)
    after = await export_reads(world)
    month = utcnow().strftime("%Y-%m")
    assert after == before + Counter({("command", month): 1})
    assert after == expected_reads(OLD_READS) + Counter(
        {("reply", "2024-03"): 12, ("command", month): 2}
    )


async def test_the_rollup_is_off_unless_an_operator_sets_it(
    world: World, sessions: SessionFactory
) -> None:
    await seed_reads(sessions, ALICE, 100)
    before = await ledger(sessions, ALICE)

    assert world.stack.settings.ledger_read_rollup_days is None
    assert await roll_up_old_reads(sessions, days=None, now=utcnow() + timedelta(days=3650)) == 0
    assert await ledger(sessions, ALICE) == before and before.total() == 100


async def test_after_a_rollup_an_erasure_still_blanks_the_replies_that_held_her_memories(
    settings: Settings, sessions: SessionFactory, redis: object, monkeypatch: Any
) -> None:
    scope = RecallScope.PARTICIPANTS
    async with trust_world(settings, monkeypatch, memory_recall_scope=scope) as world:
        to_bob = (await reply_holding_her_memory(world))["reply"]

        assert await roll_up_old_reads(sessions, days=30, now=utcnow() + timedelta(days=31)) > 0
        await world.tell(ALICE, "!forgetme", mention=False)

        async with sessions() as session:
            kept = await session.scalar(
                text("SELECT content FROM messages WHERE id = :i"), {"i": int(to_bob["id"])}
            )
        assert kept == ""
        async with sessions() as session:
            folded = await session.scalar(
                text("SELECT count(*) FROM memory_read_counts WHERE user_id = :u"), {"u": ALICE}
            )
        assert folded == 0  # her folded read counts went with the erasure
