"""Nightly run records and the style overrides they produce: the one owner of `nightly_runs`
and `style_overrides`. The nightly run writes them, a rollback marks them, the turn reads
the active style, erasure scrubs them."""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from datetime import date, datetime
from typing import Any

from sqlalchemy import Row, Text, cast, delete, func, select, text, update
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.ext.asyncio import AsyncSession

from app.kit.locks import xact_lock
from app.kit.sql import replace_mentions_in
from app.models.nightly import NightlyRun, StyleOverride

# Held by each nightly step for its whole length, so a rollback never lands mid-step.
RUN_LOCK = "nightly_run"


@dataclass(frozen=True, slots=True)
class Run:
    id: int
    day: date
    status: str
    window_start: datetime | None
    window_end: datetime | None
    diary: str | None
    summary: dict[str, Any]
    started_at: datetime
    finished_at: datetime | None
    rolled_back_at: datetime | None
    content_redacted_at: datetime | None = None


@dataclass(frozen=True, slots=True)
class Style:
    id: int
    content: str
    run_id: int | None
    created_at: datetime
    reverted_at: datetime | None
    guild_id: int | None = None  # None: a deployment-wide revision of before, applied nowhere


def _run(row: NightlyRun) -> Run:
    return Run(
        id=row.id,
        day=row.day,
        status=row.status,
        window_start=row.window_start,
        window_end=row.window_end,
        diary=row.diary,
        summary=dict(row.summary or {}),
        started_at=row.started_at,
        finished_at=row.finished_at,
        rolled_back_at=row.rolled_back_at,
        content_redacted_at=row.content_redacted_at,
    )


def _style(row: StyleOverride | Row[Any]) -> Style:
    return Style(row.id, row.content, row.run_id, row.created_at, row.reverted_at, row.guild_id)


# --- runs -------------------------------------------------------------------------------------


async def create_live(
    session: AsyncSession, *, day: date, start: datetime, end: datetime, summary: dict[str, Any]
) -> int | None:
    """A new run for ``day``; None when the day already has a live (not rolled back) run.

    The partial unique index on ``day`` makes racing callers produce exactly one run."""
    run_id: int | None = await session.scalar(
        insert(NightlyRun)
        .values(day=day, window_start=start, window_end=end, summary=summary)
        .on_conflict_do_nothing(
            index_elements=[NightlyRun.day],
            index_where=NightlyRun.rolled_back_at.is_(None),
        )
        .returning(NightlyRun.id)
    )
    return run_id


async def live_run_id(session: AsyncSession, day: date) -> int | None:
    run_id: int | None = await session.scalar(
        select(NightlyRun.id).where(NightlyRun.day == day, NightlyRun.rolled_back_at.is_(None))
    )
    return run_id


async def get(session: AsyncSession, run_id: int, *, for_update: bool = False) -> Run | None:
    row = await session.get(NightlyRun, run_id, with_for_update=for_update, populate_existing=True)
    return _run(row) if row is not None else None


async def latest_id(session: AsyncSession) -> int | None:
    run_id: int | None = await session.scalar(
        select(NightlyRun.id).order_by(NightlyRun.id.desc()).limit(1)
    )
    return run_id


async def newest(session: AsyncSession, limit: int) -> list[Run]:
    rows = await session.scalars(select(NightlyRun).order_by(NightlyRun.id.desc()).limit(limit))
    return [_run(row) for row in rows]


async def running_unlocked(session: AsyncSession) -> list[Run]:
    """Runs still running and not rolled back, each row locked for this transaction (rows
    another transaction holds are skipped)."""
    rows = await session.scalars(
        select(NightlyRun)
        .where(NightlyRun.status == "running", NightlyRun.rolled_back_at.is_(None))
        .with_for_update(skip_locked=True)
    )
    return [_run(row) for row in rows]


async def save(session: AsyncSession, run_id: int, **values: Any) -> None:
    """Write the given columns of one run (summary, diary, status, finished_at)."""
    allowed = {"summary", "diary", "diary_user_ids", "status", "finished_at"}
    if unknown := set(values) - allowed:
        raise ValueError(f"not a writable run column: {sorted(unknown)}")
    await session.execute(update(NightlyRun).where(NightlyRun.id == run_id).values(values))


async def lock_run(session: AsyncSession, run_id: int) -> None:
    """Wait for the run's lock (each nightly step holds it for its whole length)."""
    await xact_lock(session, RUN_LOCK, run_id)


async def mark_rolled_back(session: AsyncSession, run: Run, now: datetime) -> None:
    """The run is undone: its style revisions are reverted (each guild's previous style
    applies again), and a run that had not finished stops (its remaining steps see
    ``rolled_back_at``)."""
    await session.execute(
        update(StyleOverride)
        .where(StyleOverride.run_id == run.id, StyleOverride.reverted_at.is_(None))
        .values(reverted_at=now)
    )
    values: dict[str, Any] = {"rolled_back_at": now}
    if run.status == "running":
        errors = [*run.summary.get("errors", []), "rolled back before it finished"]
        values.update(status="failed", summary={**run.summary, "errors": errors})
    await session.execute(update(NightlyRun).where(NightlyRun.id == run.id).values(values))


async def mark_content_redacted(session: AsyncSession, run_ids: Sequence[int]) -> None:
    if run_ids:
        await session.execute(
            update(NightlyRun)
            .where(NightlyRun.id.in_(list(run_ids)), NightlyRun.content_redacted_at.is_(None))
            .values(content_redacted_at=func.now())
        )


# --- style overrides --------------------------------------------------------------------------


async def active_style(session: AsyncSession, guild_id: int | None) -> Style | None:
    """The guild's newest style override that has not been reverted, if any. A DM has none
    (its replies use the persona file's style), nor has any guild a deployment-wide one."""
    if guild_id is None:
        return None
    row = (await session.execute(_ACTIVE_STYLE, {"guild_id": guild_id})).first()
    return _style(row) if row is not None else None


# Built once: a turn reads it before its first question.
_ACTIVE_STYLE = text(
    "SELECT id, content, run_id, created_at, reverted_at, guild_id FROM style_overrides "
    "WHERE guild_id = :guild_id AND reverted_at IS NULL "
    "ORDER BY created_at DESC, id DESC LIMIT 1"
)


async def style_of_runs(session: AsyncSession, run_ids: Sequence[int]) -> dict[int, list[Style]]:
    """The style revisions each run produced, one per guild (runs without one are absent)."""
    if not run_ids:
        return {}
    rows = await session.scalars(
        select(StyleOverride)
        .where(StyleOverride.run_id.in_(list(run_ids)))
        .order_by(StyleOverride.id)
    )
    styles: dict[int, list[Style]] = {}
    for row in rows:
        if row.run_id is not None:
            styles.setdefault(row.run_id, []).append(_style(row))
    return styles


async def add_style(
    session: AsyncSession, *, guild_id: int, content: str, run_id: int, sources: Collection[int]
) -> None:
    """A night's style revision for one guild, made from ``sources``' feedback (provenance)."""
    session.add(
        StyleOverride(
            guild_id=guild_id, content=content, run_id=run_id, source_user_ids=sorted(sources)
        )
    )
    await session.flush()


# --- import -----------------------------------------------------------------------------------


async def runs_on_days(
    session: AsyncSession, days: Sequence[date]
) -> list[tuple[int, date, datetime, bool]]:
    """(id, day, started_at, live) of the runs on these days."""
    rows = await session.execute(
        select(
            NightlyRun.id, NightlyRun.day, NightlyRun.started_at, NightlyRun.rolled_back_at
        ).where(NightlyRun.day.in_(list(days)))
    )
    return [(i, day, started, rolled is None) for i, day, started, rolled in rows]


async def insert_imported(session: AsyncSession, values: dict[str, Any]) -> int:
    """One run as a legacy deployment recorded it; its new id."""
    row = NightlyRun(**values)
    session.add(row)
    await session.flush()
    return row.id


# --- erasure: by recorded inputs; the tables are one row per night -------------------------


Window = tuple[int, datetime, datetime]  # (run id, window start, window end)


async def blank_diaries_from(session: AsyncSession, user_id: int) -> int:
    """Blank the diaries written from the person's messages (their recorded inputs)."""
    result = await session.execute(
        update(NightlyRun)
        .where(NightlyRun.diary_user_ids.contains([user_id]))
        .values(diary="", diary_user_ids=[])
        .returning(NightlyRun.id)
    )
    return len(result.all())


async def legacy_diary_windows(session: AsyncSession) -> list[Window]:
    """The windows of diaries written before their inputs were recorded."""
    rows = await session.execute(
        select(NightlyRun.id, NightlyRun.window_start, NightlyRun.window_end).where(
            NightlyRun.diary_user_ids.is_(None),
            func.coalesce(NightlyRun.diary, "") != "",
            NightlyRun.window_start.is_not(None),
            NightlyRun.window_end.is_not(None),
        )
    )
    return [(i, start, end) for i, start, end in rows.tuples() if start and end]


async def blank_diaries(session: AsyncSession, run_ids: Collection[int]) -> int:
    if not run_ids:
        return 0
    result = await session.execute(
        update(NightlyRun)
        .where(NightlyRun.id.in_(list(run_ids)), func.coalesce(NightlyRun.diary, "") != "")
        .values(diary="")
        .returning(NightlyRun.id)
    )
    return len(result.all())


async def blank_diaries_where(
    session: AsyncSession, run_ids: Collection[int], doomed: Callable[[str], bool]
) -> int:
    """Blank, among these runs' diaries, those ``doomed`` picks (MEM-09, confined: a diary
    written before its inputs were recorded, of a night the person spoke in, naming them by a
    distinctive name theirs alone)."""
    if not run_ids:
        return 0
    rows = await session.execute(
        select(NightlyRun.id, NightlyRun.diary).where(
            NightlyRun.id.in_(list(run_ids)),
            NightlyRun.diary_user_ids.is_(None),
            func.coalesce(NightlyRun.diary, "") != "",
        )
    )
    return await blank_diaries(
        session, [i for i, diary in rows.tuples() if diary and doomed(diary)]
    )


async def delete_styles_from(session: AsyncSession, user_id: int) -> int:
    """Delete (revert) the style revisions made from the person's feedback."""
    result = await session.execute(
        delete(StyleOverride)
        .where(StyleOverride.source_user_ids.contains([user_id]))
        .returning(StyleOverride.id)
    )
    return len(result.all())


async def legacy_style_windows(session: AsyncSession) -> list[Window]:
    """(style id, its run's window) of revisions made before their inputs were recorded."""
    rows = await session.execute(
        select(StyleOverride.id, NightlyRun.window_start, NightlyRun.window_end)
        .join(NightlyRun, NightlyRun.id == StyleOverride.run_id)
        .where(StyleOverride.source_user_ids.is_(None))
    )
    return [(i, start, end) for i, start, end in rows.tuples() if start and end]


async def delete_styles(session: AsyncSession, style_ids: Collection[int]) -> int:
    if not style_ids:
        return 0
    result = await session.execute(
        delete(StyleOverride)
        .where(StyleOverride.id.in_(list(style_ids)))
        .returning(StyleOverride.id)
    )
    return len(result.all())


async def replace_mentions(session: AsyncSession, user_id: int, token: str) -> int:
    """Replace the person's mentions in diaries and style revisions."""
    return await replace_mentions_in(
        session, NightlyRun.diary, user_id, token
    ) + await replace_mentions_in(session, StyleOverride.content, user_id, token)


async def rewrite_summaries(
    session: AsyncSession, user_id: int, rewrite: Callable[[dict[str, Any]], dict[str, Any]]
) -> tuple[int, bool]:
    """Each finished run's summary through ``rewrite`` where it names the person (their id
    as a chunk's speaker, in an error); ``(rewritten, a running run names them too)``.

    A running run's summary belongs to its steps; the caller comes back once it ended."""
    needle = f"%{int(user_id)}%"
    rows = await session.execute(
        select(NightlyRun.id, NightlyRun.status, NightlyRun.summary).where(
            cast(NightlyRun.summary, Text).like(needle)
        )
    )
    changed, busy = 0, False
    for run_id, status, summary in rows.tuples():
        new = rewrite(dict(summary))
        if new == summary:
            continue
        if status == "running":
            busy = True
            continue
        await session.execute(update(NightlyRun).where(NightlyRun.id == run_id).values(summary=new))
        changed += 1
    return changed, busy
