"""Admin endpoints: roll back a nightly run, start one now, and list runs (the OpenAPI document)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Body, Depends, Path, Query, status

from app.admin.auth import require_admin
from app.admin.deps import get_queue, get_sessions
from app.admin.errors import (
    DayAlreadyRan,
    NotFound,
    RunAlreadyRolledBack,
    RunContentRedacted,
    RunNotQueued,
    responses,
)
from app.admin.schemas import (
    AUTH_ERRORS,
    NightlyRunBody,
    NightlyStartedBody,
    RollbackReport,
    RollbackRequest,
    RunSummary,
    SkippedChange,
    StyleRevision,
)
from app.db import SessionFactory
from app.kit.clock import utcnow
from app.kit.queue import JobQueue
from app.memory.rollback import (
    AlreadyRolledBack,
    ContentRedacted,
    RollbackResult,
    RunNotFound,
    rollback_run,
)
from app.nightly import store as runs
from app.nightly.progress import Progress
from app.nightly.run import AlreadyRan, start_nightly_run

router = APIRouter(tags=["admin"], dependencies=[Depends(require_admin)], responses=AUTH_ERRORS)

Sessions = Annotated[SessionFactory, Depends(get_sessions)]
RunId = Annotated[int, Path(ge=1, le=2**63 - 1)]


def _report(result: RollbackResult) -> RollbackReport:
    plan = result.plan
    return RollbackReport(
        run_id=result.run_id,
        dry_run=result.dry_run,
        deleted=plan.deleted,
        restored=plan.restored,
        reinserted=plan.reinserted,
        skipped=[
            SkippedChange(memory_id=s.memory_id, action=s.action, reason=s.reason)
            for s in plan.skipped
        ],
    )


@router.post(
    "/memory/rollback",
    response_model=RollbackReport,
    responses=responses(
        NotFound,
        RunAlreadyRolledBack,
        RunContentRedacted,
        NotFound="no such run (or no run yet)",
    ),
    summary="Undo a nightly run (the latest when no runId is given)",
)
async def rollback(
    sessions: Sessions, body: Annotated[RollbackRequest | None, Body()] = None
) -> RollbackReport:
    request = body or RollbackRequest()
    try:
        result = await rollback_run(sessions, request.run_id, dry_run=request.dry_run)
    except RunNotFound as exc:
        raise NotFound(str(exc)) from None
    except AlreadyRolledBack as exc:
        raise RunAlreadyRolledBack(exc.run_id) from None
    except ContentRedacted as exc:
        raise RunContentRedacted(exc.run_id) from None
    return _report(result)


@router.post(
    "/nightly/run",
    status_code=status.HTTP_202_ACCEPTED,
    response_model=NightlyStartedBody,
    responses=responses(DayAlreadyRan, RunNotQueued),
    summary="Run the nightly consolidation now, over the 24 hours before the request",
)
async def run_nightly(
    sessions: Sessions, queue: Annotated[JobQueue, Depends(get_queue)]
) -> NightlyStartedBody:
    outcome = await start_nightly_run(sessions, queue, now=utcnow())
    if isinstance(outcome, AlreadyRan):
        raise DayAlreadyRan(outcome.run_id)
    if not outcome.queued:
        # The run row exists and the sweeper will resume it; the job is not queued yet.
        raise RunNotQueued(outcome.run_id)
    return NightlyStartedBody(run_id=outcome.run_id, day=outcome.day)


@router.get(
    "/nightly/runs", response_model=list[NightlyRunBody], summary="Nightly runs, newest first"
)
async def list_runs(
    sessions: Sessions, limit: Annotated[int, Query(ge=1, le=500)] = 50
) -> list[NightlyRunBody]:
    async with sessions() as session:
        found = await runs.newest(session, limit)
        styles = await runs.style_of_runs(session, [run.id for run in found])
    return [_run_body(run, styles.get(run.id, [])) for run in found]


@router.get(
    "/nightly/runs/{run_id}",
    response_model=NightlyRunBody,
    responses=responses(NotFound, NotFound="no such run"),
    summary="One nightly run with its summary",
)
async def get_run(sessions: Sessions, run_id: RunId) -> NightlyRunBody:
    async with sessions() as session:
        run = await runs.get(session, run_id)
        if run is None:
            raise NotFound(f"no nightly run {run_id}")
        styles = await runs.style_of_runs(session, [run.id])
    return _run_body(run, styles.get(run.id, []))


def _run_body(run: runs.Run, styles: list[runs.Style]) -> NightlyRunBody:
    summary = dict(run.summary or {})
    pending = Progress.of(summary).next
    return NightlyRunBody(
        id=run.id,
        run_id=run.id,
        day=run.day,
        status=run.status,
        step=str(pending) if run.status == "running" and pending is not None else None,
        window_start=run.window_start,
        window_end=run.window_end,
        diary=run.diary,
        summary=RunSummary.model_validate(
            {k: v for k, v in summary.items() if k in RunSummary.model_fields}
        ),
        style_revisions=[
            StyleRevision(
                id=style.id,
                guild_id=str(style.guild_id) if style.guild_id is not None else None,
                content=style.content,
                created_at=style.created_at,
                reverted_at=style.reverted_at,
            )
            for style in styles
        ],
        started_at=run.started_at,
        finished_at=run.finished_at,
        rolled_back_at=run.rolled_back_at,
    )
