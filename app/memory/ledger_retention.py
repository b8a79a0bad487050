"""Ledger content retention (LEDGER_CONTENT_DAYS, off by default: seed 000 keeps the ledger
forever). When set, a daily job removes the memory text from ledger rows older than that:
the storage limit an operator under GDPR would turn on. Runs whose changes lost their text
are marked, and a rollback of one is refused."""

from __future__ import annotations

import logging
from datetime import datetime, timedelta

from app.db import SessionFactory, unit_of_work
from app.memory import store
from app.nightly import store as runs

logger = logging.getLogger(__name__)


async def redact_old_ledger_content(
    sessions: SessionFactory, *, days: int | None, now: datetime
) -> set[int]:
    """Redact the text of ledger rows older than ``days``; the runs that lost theirs."""
    if days is None:
        return set()
    async with unit_of_work(sessions) as session:
        run_ids = await store.redact_content_before(session, now - timedelta(days=days))
        await runs.mark_content_redacted(session, sorted(run_ids))
    if run_ids:
        logger.info("ledger content redacted", extra={"runs": sorted(run_ids)})
    return run_ids
