"""The erasure's statistics phase where the bot's role may not refresh a table's samples (a
table an operator added under another owner): the table is passed over with a warning, and
the erasure goes on to its receipt instead of failing over and over."""

from __future__ import annotations

import logging
from typing import cast

import pytest
from sqlalchemy import text

from app.db import SessionFactory
from app.privacy.erasure import PHASES, Phase, Progress, Who

ROLE = "companion_test_no_maintain"


async def test_tables_the_role_may_not_analyse_are_passed_over(
    sessions: SessionFactory, caplog: pytest.LogCaptureFixture
) -> None:
    async with sessions() as session, session.begin():
        await session.execute(
            text(
                f"DO $$ BEGIN CREATE ROLE {ROLE} NOLOGIN; "
                "EXCEPTION WHEN duplicate_object OR unique_violation THEN NULL; END $$"
            )
        )
    progress = Progress(phase=Phase.STATISTICS)
    step = PHASES[Phase.STATISTICS]
    with caplog.at_level(logging.WARNING, logger="app.privacy.erasure"):
        async with sessions() as session, session.begin():
            await session.execute(text(f"SET LOCAL ROLE {ROLE}"))  # owns none of the tables
            for _ in range(100):
                if progress.phase is not Phase.STATISTICS:
                    break
                await step(session, cast(Who, None), progress)
    assert progress.phase is Phase.NOTIFY  # on to the receipt
    passed_over = [r for r in caplog.records if r.getMessage().startswith("erasure: statistics")]
    assert passed_over  # and each table it could not refresh is said
