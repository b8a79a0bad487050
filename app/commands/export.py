"""Everything kept about a person as JSON, written a page at a time: every memory with its
origin and sources, the pause state, every change in the ledger, and its reads counted per
actor and month. `!memory export` takes it in files under Discord's limit; the admin export
takes it whole, in one file. Serialisation runs off the event loop; memory holds a page."""

from __future__ import annotations

import asyncio
from contextlib import ExitStack
from dataclasses import dataclass

from sqlalchemy.ext.asyncio import AsyncSession

from app.commands import render
from app.consent import store as consent
from app.kit.clock import utcnow
from app.kit.parts import JsonFiles, Spooled
from app.memory import store
from app.memory.records import Why

ARRAYS = ("memories", "ledger")


@dataclass(frozen=True, slots=True)
class Exported:
    """The files of one export (alive until the ``ExitStack`` they were made in closes),
    and how many memories and changes they hold."""

    files: list[Spooled]
    memories: int
    changes: int


async def export_profile(
    session: AsyncSession,
    user_id: int,
    why: Why,
    spool: ExitStack,
    *,
    limit: int,
    max_files: int,
) -> Exported:
    """One logged read of the person's profile, written into at most ``max_files`` files of
    at most ``limit`` bytes each, spooled in ``spool``. Raises ``TooLarge`` when it needs
    more (the read stays logged if the caller commits)."""
    memories = await store.read_everything(session, user_id, why)
    paused = await consent.paused_since(session, user_id)
    reads = await store.read_counts(session, user_id)
    head = render.export_head(user_id, utcnow(), paused, reads)
    out = spool.enter_context(JsonFiles(limit=limit, max_files=max_files, head=head, arrays=ARRAYS))
    async for page in store.memory_pages(session, user_id):
        sources = await store.sources_of(session, [m.id for m in page])
        items = (render.memory_json(m, sources.get(m.id, [])) for m in page)
        await asyncio.to_thread(out.add, "memories", items)
    changes = 0
    async for rows in store.change_pages(session, user_id):
        await asyncio.to_thread(out.add, "ledger", map(render.ledger_json, rows))
        changes += len(rows)
    return Exported(out.finish(), memories, changes)
