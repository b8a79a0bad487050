"""The nightly run records' owner: a guild's active style override is its newest unreverted
one; another guild's, a DM, and a deployment-wide override of before see none of it."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from app.db import SessionFactory
from app.models.nightly import StyleOverride
from app.nightly.store import active_style

GUILD_A, GUILD_B = 1, 2


async def test_active_style_is_the_guilds_newest_unreverted_override(
    sessions: SessionFactory,
) -> None:
    now = datetime.now(UTC)
    async with sessions() as session, session.begin():
        session.add_all(
            [
                StyleOverride(guild_id=GUILD_A, content="old", created_at=now - timedelta(days=2)),
                StyleOverride(
                    guild_id=GUILD_A, content="newest but reverted", created_at=now, reverted_at=now
                ),
                StyleOverride(
                    guild_id=GUILD_A, content="current", created_at=now - timedelta(days=1)
                ),
                StyleOverride(guild_id=GUILD_B, content="guild B's", created_at=now),
                StyleOverride(guild_id=None, content="deployment-wide, of before", created_at=now),
            ]
        )

    async with sessions() as session:
        in_a = await active_style(session, GUILD_A)
        in_b = await active_style(session, GUILD_B)
        in_a_dm = await active_style(session, None)

    assert in_a is not None and (in_a.content, in_a.guild_id) == ("current", GUILD_A)
    assert in_b is not None and in_b.content == "guild B's"
    assert in_a_dm is None


async def test_a_deployment_wide_override_of_before_applies_in_no_guild(
    sessions: SessionFactory,
) -> None:
    async with sessions() as session, session.begin():
        session.add(StyleOverride(guild_id=None, content="made from every guild and DM"))

    async with sessions() as session:
        assert await active_style(session, GUILD_A) is None
        assert await active_style(session, None) is None
