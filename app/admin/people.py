"""Admin inspection and erasure of one person's memories: what is kept about them, where it
came from, the ledger, the whole export (for a person whose `!memory export` is too large for
Discord), and the same erasure as `!forgetme` for people who cannot run it.

Every read here is itself a ledger read with actor `admin`."""

from __future__ import annotations

import sys
from contextlib import ExitStack
from dataclasses import asdict
from typing import Annotated

from fastapi import APIRouter, Depends, Path, Query, status
from fastapi.responses import StreamingResponse
from starlette.background import BackgroundTask

from app.admin.auth import require_admin
from app.admin.deps import get_queue, get_sessions
from app.admin.errors import NotFound, responses
from app.admin.schemas import (
    AUTH_ERRORS,
    ErasureBody,
    ErasureStartedBody,
    LedgerPage,
    LedgerRowBody,
    MemoryBody,
    OriginBody,
    SourceBody,
)
from app.commands.export import export_profile
from app.commands.render import jump_link
from app.db import SessionFactory, unit_of_work
from app.kit.queue import JobQueue
from app.memory import store
from app.memory.records import LedgerRow, MemoryRecord, SourceMessage, Why
from app.privacy import store as register
from app.privacy.erasure import start_erasure
from app.privacy.store import RequestedBy
from app.vocabulary import Actor

router = APIRouter(tags=["admin"], dependencies=[Depends(require_admin)], responses=AUTH_ERRORS)

Sessions = Annotated[SessionFactory, Depends(get_sessions)]
Snowflake = Annotated[int, Path(ge=0, le=2**63 - 1)]
ADMIN = Actor.ADMIN
WHOLE = sys.maxsize  # the admin export is one file, however large (it is not sent to Discord)


def _memory(record: MemoryRecord, sources: list[SourceMessage]) -> MemoryBody:
    guild = record.origin.guild_id
    return MemoryBody(
        id=record.id,
        user_id=str(record.user_id),
        content=record.content,
        source=record.source,
        origin=OriginBody(
            kind=record.origin.kind,
            guild_id=str(guild) if guild is not None else None,
        ),
        sources=[
            SourceBody(
                message_id=str(s.message_id),
                channel_id=str(s.channel_id),
                guild_id=str(s.guild_id) if s.guild_id is not None else None,
                link=jump_link(s),
                batch=s.trigger,
            )
            for s in sources
        ],
        created_at=record.created_at,
        updated_at=record.updated_at,
    )


def _row(row: LedgerRow) -> LedgerRowBody:
    return LedgerRowBody.model_validate({**asdict(row), "user_id": str(row.user_id)})


@router.get(
    "/users/{user_id}/memories",
    response_model=list[MemoryBody],
    summary="A person's memories, each with its origin and sources (a logged read)",
)
async def user_memories(sessions: Sessions, user_id: Snowflake) -> list[MemoryBody]:
    async with unit_of_work(sessions) as session:
        memories = await store.recent(session, user_id, Why(ADMIN, "inspect"), limit=None)
        sources = await store.sources_of(session, [m.id for m in memories])
    return [_memory(m, sources.get(m.id, [])) for m in memories]


@router.get(
    "/users/{user_id}/memory-log",
    response_model=LedgerPage,
    summary="A person's ledger rows, newest first, paged by id (a logged read)",
)
async def user_memory_log(
    sessions: Sessions,
    user_id: Snowflake,
    limit: Annotated[int, Query(ge=1, le=500)] = 100,
    before: Annotated[int | None, Query(ge=1, le=2**63 - 1, description="rows older")] = None,
    hide_admin_reads: Annotated[
        bool,
        Query(
            alias="hideAdminReads",
            description="leave out the reads logged by these admin endpoints themselves",
        ),
    ] = False,
) -> LedgerPage:
    async with unit_of_work(sessions) as session:
        rows = await store.history(
            session,
            Why(ADMIN, "inspect ledger"),
            user_id=user_id,
            limit=limit,
            before_id=before,
            hide_reads_by=[ADMIN] if hide_admin_reads else [],
        )
    next_before = rows[-1].id if len(rows) == limit else None
    return LedgerPage(rows=[_row(r) for r in rows], next_before=next_before)


@router.get(
    "/memories/{memory_id}",
    response_model=MemoryBody,
    responses=responses(NotFound, NotFound="no such memory"),
    summary="One memory with its origin and sources (a logged read)",
)
async def one_memory(sessions: Sessions, memory_id: Snowflake) -> MemoryBody:
    async with unit_of_work(sessions) as session:
        found = await store.provenance(session, memory_id, Why(ADMIN, "inspect memory"))
    if found is None:
        raise NotFound(f"no memory {memory_id}")
    return _memory(found.record, found.sources)


@router.get(
    "/users/{user_id}/export",
    response_class=StreamingResponse,
    responses={
        200: {
            "description": "One JSON document, the same as `!memory export` makes (a single "
            "file, whatever its size): `memories`, `ledger` (every change), `reads` (counted "
            "per actor and month), the pause state",
            "content": {"application/json": {"schema": {"type": "object"}}},
        }
    },
    summary="Everything kept about a person, whole, as JSON (a logged read)",
    description="For a person whose `!memory export` is too large for Discord. Written a "
    "page at a time to a temporary file, then streamed.",
)
async def user_export(sessions: Sessions, user_id: Snowflake) -> StreamingResponse:
    spool = ExitStack()
    try:
        async with unit_of_work(sessions) as session:
            exported = await export_profile(
                session, user_id, Why(ADMIN, "export"), spool, limit=WHOLE, max_files=1
            )
    except BaseException:
        spool.close()
        raise
    [whole] = exported.files
    return StreamingResponse(
        whole.chunks(),
        media_type="application/json",
        headers={"Content-Disposition": f'attachment; filename="memories-{user_id}.json"'},
        background=BackgroundTask(spool.close),
    )


@router.post(
    "/users/{user_id}/erase",
    status_code=status.HTTP_202_ACCEPTED,
    response_model=ErasureStartedBody,
    summary="Erase everything kept from a person, as `!forgetme` does, in the worker",
    description="Answers once the erasure is registered (from then on nothing new is written "
    "about the person); the worker erases in committed batches. A running erasure of the same "
    "person is joined, not repeated. Follow it with `GET /erasures/{erasureId}`.",
)
async def erase(
    sessions: Sessions, queue: Annotated[JobQueue, Depends(get_queue)], user_id: Snowflake
) -> ErasureStartedBody:
    erasure = await start_erasure(sessions, queue, user_id, requested_by=RequestedBy.ADMIN)
    return ErasureStartedBody(erasure_id=erasure.id, status=erasure.status)


@router.get(
    "/erasures/{erasure_id}",
    response_model=ErasureBody,
    responses=responses(NotFound, NotFound="no such erasure"),
    summary="An erasure's status and, once done, its receipt",
)
async def erasure_status(
    sessions: Sessions, erasure_id: Annotated[int, Path(ge=1, le=2**63 - 1)]
) -> ErasureBody:
    async with sessions() as session:
        found = await register.get(session, erasure_id)
    if found is None:
        raise NotFound(f"no erasure {erasure_id}")
    return ErasureBody(
        erasure_id=found.id,
        user_id=str(found.user_id),
        status=found.status,
        receipt=found.receipt,
        started_at=found.started_at,
        finished_at=found.finished_at,
    )
