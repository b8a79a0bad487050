"""The nightly run records' owner: the active style override is the newest unreverted one."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from app.db import SessionFactory
from app.models.nightly import StyleOverride
from app.nightly.store import active_style


async def test_active_style_is_the_newest_unreverted_override(sessions: SessionFactory) -> None:
    now = datetime.now(UTC)
    async with sessions() as session, session.begin():
        session.add_all(
            [
                StyleOverride(content="old", created_at=now - timedelta(days=2)),
                StyleOverride(content="newest but reverted", created_at=now, reverted_at=now),
                StyleOverride(content="current", created_at=now - timedelta(days=1)),
            ]
        )

    async with sessions() as session:
        active = await active_style(session)

    assert active is not None
    assert active.content == "current"


async def test_no_override_means_no_active_style(sessions: SessionFactory) -> None:
    async with sessions() as session:
        assert await active_style(session) is None
