"""Ledger retention, both off by default (seed 000 keeps the ledger forever), run by the
daily prune job.

- Content (LEDGER_CONTENT_DAYS): the memory text is removed from ledger rows older than that,
  the storage limit an operator under GDPR would turn on. Runs whose changes lost their text
  are marked, and a rollback of one is refused.
- Reads (LEDGER_READ_ROLLUP_DAYS): read rows older than that are folded into counts per
  person, actor and month and removed, so the ledger grows with the changes, not with every
  reply; exports still report every read. A reply prompt's read that found memories stays a
  row (an erasure follows it to the reply). At most ROLLUP_BATCHES × ROLLUP_BATCH rows a
  night, each batch its own transaction; a longer backlog continues the next night."""

from __future__ import annotations

import logging
from datetime import datetime, timedelta

from app.db import SessionFactory, unit_of_work
from app.memory import store
from app.nightly import store as runs

logger = logging.getLogger(__name__)

ROLLUP_BATCH = 5_000
ROLLUP_BATCHES = 200


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


async def roll_up_old_reads(sessions: SessionFactory, *, days: int | None, now: datetime) -> int:
    """Fold the read rows older than ``days`` into counts, batch by batch; how many."""
    if days is None:
        return 0
    cutoff, folded = now - timedelta(days=days), 0
    for _ in range(ROLLUP_BATCHES):
        async with unit_of_work(sessions) as session:
            batch = await store.roll_up_reads(session, cutoff=cutoff, limit=ROLLUP_BATCH)
        folded += batch
        if batch < ROLLUP_BATCH:
            break
    if folded:
        logger.info("ledger reads rolled up", extra={"reads": folded})
    return folded
