"""The usage suites' stack: the real API and worker with one staff member (STAFF), and no
consolidation to spend calls the tests do not count."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from app.config import Settings
from app.db import SessionFactory
from tests.support.stack import Stack, running_stack

STAFF = 2099


@pytest.fixture
async def stack(
    settings: Settings, sessions: SessionFactory, redis: object, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[Stack]:
    async with running_stack(
        settings, monkeypatch, staff_user_ids=[STAFF], memory_consolidate_every=1000
    ) as running:
        yield running
