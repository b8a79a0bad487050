"""Migration 0011: existing channel pins learn their channel's guild (from the channel
directory, else the channel log; unknown stays NULL, so only an operator removes it), and
existing deployment-wide style revisions are kept but applied in no guild and no DM."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from app.db import create_session_factory
from app.nightly import store as runs
from tests.support.migrations import ScratchDatabase, database_at

KNOWN_CHANNEL, LOGGED_CHANNEL, UNKNOWN_CHANNEL = 301, 302, 303
GUILD_OF_KNOWN, GUILD_OF_LOGGED = 600, 700


@pytest.fixture
async def at_0010() -> AsyncIterator[ScratchDatabase]:
    async with database_at("m0011", "0010") as database:
        yield database


async def test_pins_learn_their_guild_and_old_styles_apply_nowhere(
    at_0010: ScratchDatabase,
) -> None:
    async with at_0010.engine.begin() as conn:
        await conn.exec_driver_sql(
            "INSERT INTO channels (id, guild_id) VALUES ($1, $2)", (KNOWN_CHANNEL, GUILD_OF_KNOWN)
        )
        await conn.exec_driver_sql(
            "INSERT INTO messages (id, channel_id, guild_id, author_id, author_name, content, "
            "created_at) VALUES (1, $1, $2, 11, 'alice', 'hi', now())",
            (LOGGED_CHANNEL, GUILD_OF_LOGGED),
        )
        for channel in (KNOWN_CHANNEL, LOGGED_CHANNEL, UNKNOWN_CHANNEL):
            await conn.exec_driver_sql(
                "INSERT INTO pins (scope, channel_id, content, created_by) "
                "VALUES ('channel', $1, 'a pin', 7)",
                (channel,),
            )
        await conn.exec_driver_sql(
            "INSERT INTO pins (scope, content, created_by) VALUES ('global', 'for all', 7)"
        )
        await conn.exec_driver_sql("INSERT INTO style_overrides (content) VALUES ('Be formal.')")

    await at_0010.migrate("head")

    async with at_0010.engine.connect() as conn:
        rows = await conn.exec_driver_sql("SELECT scope, channel_id, guild_id FROM pins")
        guilds = {(scope, channel): guild for scope, channel, guild in rows}
    assert guilds == {
        ("channel", KNOWN_CHANNEL): GUILD_OF_KNOWN,
        ("channel", LOGGED_CHANNEL): GUILD_OF_LOGGED,
        ("channel", UNKNOWN_CHANNEL): None,
        ("global", None): None,
    }
    async with create_session_factory(at_0010.engine)() as session:
        assert await runs.active_style(session, GUILD_OF_KNOWN) is None
        assert await runs.active_style(session, None) is None

    await at_0010.migrate("0010", down=True)
