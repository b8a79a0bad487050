"""The planner's samples (``app.privacy.samples``): a memory forgotten during the day leaves
pg_statistic at the daily prune (the 04:30 JST cron job's last step); a table the bot's role
may not refresh (one an operator added under another owner) is passed over with a warning,
and an erasure goes on to its receipt instead of failing over and over."""

from __future__ import annotations

import logging
from typing import cast

import pytest
from sqlalchemy import text

from app.config import Settings
from app.db import SessionFactory, unit_of_work
from app.memory import store
from app.memory.records import Why
from app.privacy.erasure import PHASES, Phase, Progress, Who
from app.vocabulary import Actor
from app.worker import prune
from tests.support.memory_env import add_memory
from tests.support.samples import sampled
from tests.support.worker import started_worker

ROLE = "companion_test_no_maintain"
SECRET = "sampled-secret-4c1e9b"


async def tables_sampled(sessions: SessionFactory) -> set[str]:
    return {table for table, _ in await sampled(sessions, [SECRET])}


async def test_a_forgotten_memory_leaves_the_samples_at_the_daily_prune(
    settings: Settings, sessions: SessionFactory, redis: object
) -> None:
    memory_id = await add_memory(sessions, 7301, f"Kai's {SECRET} is the blue notebook")
    await add_memory(sessions, 7301, "Kai walks to work")
    async with sessions() as session:
        await session.execute(text("ANALYZE memories"))
        await session.commit()
    assert "memories" in await tables_sampled(sessions)  # as autovacuum leaves it

    async with unit_of_work(sessions) as session:
        assert await store.delete_one(
            session, memory_id, Why(Actor.COMMAND, "!memory forget"), owner=7301
        )
    assert "memories" in await tables_sampled(sessions)  # the row is gone, its sample is not

    # The 04:30 JST cron job, as the real worker runs it: with the services it started.
    async with started_worker(settings) as ctx:
        await prune(ctx)

    assert await tables_sampled(sessions) == set()


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
    with caplog.at_level(logging.WARNING, logger="app.privacy"):
        async with sessions() as session, session.begin():
            await session.execute(text(f"SET LOCAL ROLE {ROLE}"))  # owns none of the tables
            for _ in range(100):
                if progress.phase is not Phase.STATISTICS:
                    break
                await step(session, cast(Who, None), progress)
    assert progress.phase is Phase.NOTIFY  # on to the receipt
    passed_over = [r for r in caplog.records if r.getMessage().startswith("statistics not")]
    assert passed_over  # and each table it could not refresh is said
