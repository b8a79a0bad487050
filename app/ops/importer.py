"""MEM-08: load an existing deployment — the original bot's SQLite database and its legacy
per-channel memory strings — into Postgres, idempotently, in one transaction.

Reader (``app.ops.legacy``) → what the target holds, asked of each table's owner → a pure
plan (``app.ops.import_plan``) → apply through the owners. A dry run stops after the plan."""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession

from app.channel import store as channel_log
from app.db import SessionFactory
from app.episodes import store as episodes
from app.kit.locks import xact_lock
from app.kit.sql import bump_identity
from app.memory import store
from app.nightly import store as runs
from app.ops.import_plan import PRESENT, Existing, ImportReport, Plan, plan_import
from app.ops.legacy import TRIGGER_PREFIX, LegacyData, LegacyLogRow, read_inputs
from app.signals import store as signals

LOCK_NAMESPACE = "legacy-import"
SOURCE = "import"


async def load_existing(session: AsyncSession, data: LegacyData) -> Existing:
    """What the target already holds of this import, asked of each table's owner."""
    found = Existing()
    found.message_ids = await channel_log.existing_ids(session, [m.id for m in data.messages])
    view = await store.import_view(
        session,
        [m.id for m in data.memories],
        [r.key for r in data.memory_log],
        TRIGGER_PREFIX,
    )
    found.memory_owners, found.memory_history, found.log_keys = (
        view.owners,
        view.history,
        view.imported_keys,
    )
    found.erased_users = await store.erased_users(session)
    found.signal_ids, found.signal_keys = await signals.existing(
        session, [s.id for s in data.signals], [s.message_id for s in data.signals]
    )
    days = sorted({run.day for run in data.nightly_runs})
    for run_id, day, started_at, live in await runs.runs_on_days(session, days):
        found.runs[(day, started_at)] = run_id
        if live:
            found.live_days.add(day)
    found.episodes = await episodes.existing(session, [e.channel_id for e in data.episodes])
    return found


def _settle(plan: Plan, table: str, inserted: int) -> None:
    # Rows that appeared between the plan and the insert (the bot is running) were skipped.
    count = plan.counts[table]
    count.skipped(PRESENT, count.insert - inserted)
    count.insert = inserted


async def _insert_runs(session: AsyncSession, plan: Plan) -> None:
    for run in plan.runs:
        plan.run_ids[run.id] = await runs.insert_imported(
            session,
            {
                "day": run.day,
                "status": "finished" if run.finished_at is not None else "failed",
                "diary": run.diary,
                "summary": {**run.summary, "imported_from_run": run.id},
                "started_at": run.started_at,
                "finished_at": run.finished_at,
                "rolled_back_at": run.rolled_back_at,
            },
        )


def _log_values(plan: Plan, row: LegacyLogRow) -> dict[str, Any]:
    # A new ledger id; the legacy id lives on in `trigger`, the import's de-duplication key.
    values = asdict(row)
    values.pop("id")
    values["run_id"] = plan.run_ids[row.run_id] if row.run_id is not None else None
    values["trigger"] = row.key
    return values


async def apply_plan(session: AsyncSession, plan: Plan) -> None:
    await _insert_runs(session, plan)
    messages = [asdict(m) for m in plan.messages]
    _settle(plan, "messages", await channel_log.insert_many(session, messages))
    memories = [asdict(m) | {"source": SOURCE} for m in plan.memories]
    ledger = [_log_values(plan, row) for row in plan.memory_log]
    added, logged = await store.insert_imported(session, memories, ledger)
    _settle(plan, "memories", added)
    _settle(plan, "memory_log", logged)
    _settle(plan, "signals", await signals.insert_many(session, [asdict(s) for s in plan.signals]))
    await bump_identity(session, "signals")
    rows = [{"channel_id": e.channel_id, "content": e.content} for e in plan.episodes]
    _settle(plan, "episodes", await episodes.insert_many(session, rows))


async def import_legacy(
    sessions: SessionFactory,
    *,
    sqlite_path: Path | None,
    legacy_json: Path | None = None,
    dry_run: bool = False,
) -> ImportReport:
    """Validate everything, then insert what is new in one transaction (or only report it)."""
    data = read_inputs(sqlite_path, legacy_json)
    async with sessions() as session, session.begin():
        # Two imports at once would both plan the same rows; the second waits and skips them.
        await xact_lock(session, LOCK_NAMESPACE, 0)
        plan = plan_import(data, await load_existing(session, data))
        if dry_run:
            await session.rollback()
            return ImportReport(True, plan.counts)
        await apply_plan(session, plan)
    return ImportReport(False, plan.counts)
