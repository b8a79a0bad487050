"""Migration 0015: a persona's author is back-filled from whoever last set the channel's
settings (the only record there was), and a thread's recorded frames and its name are filed
under the thread's owner, from the frames still kept."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

import pytest

from tests.support.migrations import ScratchDatabase, database_at

STAFF, OWNER = 11, 22
PERSONA_CHANNEL, THREAD, PLAIN = 301, 302, 303


@pytest.fixture
async def at_0014() -> AsyncIterator[ScratchDatabase]:
    async with database_at("m0015", "0014") as database:
        yield database


async def test_personas_and_thread_names_learn_whose_words_they_are(
    at_0014: ScratchDatabase,
) -> None:
    thread = {
        "op": 0,
        "t": "THREAD_CREATE",
        "d": {"id": str(THREAD), "parent_id": str(PLAIN), "name": "plans", "owner_id": str(OWNER)},
    }
    async with at_0014.engine.begin() as conn:
        await conn.exec_driver_sql(
            "INSERT INTO channels (id, guild_id, persona, settings_by) "
            "VALUES ($1, 1, 'Be kind', $2)",
            (PERSONA_CHANNEL, STAFF),
        )
        await conn.exec_driver_sql(
            "INSERT INTO channels (id, guild_id, parent_id, name, type) "
            "VALUES ($1, 1, $2, 'plans', 11)",
            (THREAD, PLAIN),
        )
        await conn.exec_driver_sql(
            "INSERT INTO channels (id, guild_id, mode, settings_by) VALUES ($1, 1, 'free', $2)",
            (PLAIN, STAFF),
        )
        await conn.exec_driver_sql(
            "INSERT INTO inbox (id, event_type, payload, channel_id) "
            "VALUES ('thread-create:302', 'THREAD_CREATE', $1::jsonb, $2)",
            (json.dumps(thread), THREAD),
        )

    await at_0014.migrate("0015")

    async with at_0014.engine.connect() as conn:
        rows = await conn.exec_driver_sql("SELECT id, persona_by, name_by FROM channels")
        channels = {row[0]: (row[1], row[2]) for row in rows}
        author = await conn.exec_driver_sql("SELECT author_id FROM inbox")
        assert author.scalar_one() == OWNER
    assert channels == {
        PERSONA_CHANNEL: (STAFF, None),
        THREAD: (None, OWNER),
        PLAIN: (None, None),  # a mode set, no persona: nobody's words
    }
    await at_0014.migrate("0014", down=True)  # and back
