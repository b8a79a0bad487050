"""Migration 0020: usage rows written before it read as having no estimated calls (what they
charged was reported, or is not known), go on adding up after it, and it goes down again."""

from __future__ import annotations

from datetime import date

from app.db import create_session_factory, unit_of_work
from app.kit.spend import PurposeSpend, UsageKey
from app.usage import store
from app.usage.store import EVERYWHERE, Spent
from tests.support.migrations import database_at

DAY = date(2026, 12, 4)


async def test_old_usage_rows_read_as_reported_and_keep_adding_up() -> None:
    async with database_at("m0020", "0019") as database:
        async with database.engine.begin() as conn:
            await conn.exec_driver_sql(
                "INSERT INTO model_usage (day, guild_id, user_id, purpose, calls, input_tokens, "
                "output_tokens) VALUES ($1, 500, 2001, 'reply', 2, 100, 10)",
                (DAY,),
            )

        await database.migrate("head")

        sessions = create_session_factory(database.engine)
        async with unit_of_work(sessions) as session:
            key = UsageKey(DAY, 500, 2001, "reply")
            await store.add(session, {key: PurposeSpend(1, 40, 4, estimated_calls=1)})
        async with sessions() as session:
            rows, total, _ = await store.day_rows(session, DAY, EVERYWHERE, limit=10)
        assert [r.spent for r in rows] == [Spent(3, 140, 14, estimated_calls=1)]
        assert total == Spent(3, 140, 14, estimated_calls=1)

        await database.engine.dispose()
        await database.migrate("0019", down=True)
        await database.migrate("head")
