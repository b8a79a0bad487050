"""`!memory …`: a person's own memories, and nobody else's — see them (show, show all, why,
search, export), control learning (pause, resume), remove them (forget <id>, forget all).

The dispatcher parses the command and calls one of these. Short answers go to the channel as
a reply to the command; anything that shows a memory goes only by DM, and when the DM cannot
be delivered the channel learns that, never what."""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from app.commands import render
from app.consent import store as consent
from app.db import unit_of_work
from app.discord.client import MAX_UPLOAD_BYTES, Attachment
from app.discord.errors import DiscordError
from app.frames.events import MessageCreate
from app.kit.clock import utcnow
from app.kit.relevance import Query
from app.memory import records, store
from app.memory.records import Why
from app.services import Services
from app.vocabulary import Actor

logger = logging.getLogger(__name__)

ACTOR = Actor.COMMAND
# `show all` goes as a text file instead of several DMs past this many characters.
LISTING_INLINE_CHARS = 6000

DM_FAILED = (
    "I couldn't send you a direct message, so I can't show your memories here. "
    "Allow DMs from this server's members and try again."
)
DM_SENT = "I've sent you a DM with what I remember about you."
WHY_SENT = "I've sent you a DM with where that memory came from."
SEARCH_SENT = "I've sent you a DM with the memories that match."
NOTHING_TO_SEARCH = "I couldn't find any words to search for in that. Try `!memory search <words>`."
EXPORT_SENT = "I've sent you a DM with everything I keep about you, as a JSON file."
FORGET_ALL_NONE = "I had no memories about you to forget."
FORGET_ALL = "!memory forget all"
PAUSED = (
    "Paused: I won't learn anything new about you until you say `!memory resume`. "
    "I still use what I already remember; `!memory forget all` removes it."
)
ALREADY_PAUSED = "Learning about you was already paused. `!memory resume` turns it back on."
RESUMED = "Resumed: I'll learn from our conversations again."
NOT_PAUSED = "Learning about you is on; nothing to resume."


@dataclass(frozen=True, slots=True)
class Asker:
    """Who asked, where, and the command message (the reply target and nonce key)."""

    user_id: int
    channel_id: int
    guild_id: int | None
    trigger_id: int

    @classmethod
    def of(cls, message: MessageCreate) -> Asker:
        return cls(message.author.id, message.channel_id, message.guild_id, message.id)


async def _answer(services: Services, asker: Asker, text: str) -> None:
    await services.discord.send_message(
        asker.channel_id,
        text,
        nonce_key=f"memory-cmd:{asker.trigger_id}",
        reply_to=asker.trigger_id,
    )


async def _by_dm(
    services: Services,
    asker: Asker,
    text: str,
    *,
    sent: str,
    files: Sequence[Attachment] = (),
) -> None:
    """DM the asker; the channel hears only that it was sent, or that it could not be."""
    try:
        await services.discord.send_dm(
            asker.user_id, text, nonce_key=f"memory-dm:{asker.trigger_id}", files=files
        )
    except DiscordError as exc:
        # Never fall back to the channel with the content: only say the DM failed.
        logger.info("memory command: DM failed", extra={"error": type(exc).__name__})
        await _answer(services, asker, DM_FAILED)
        return
    await _answer(services, asker, sent)


# --- see ------------------------------------------------------------------------------------


async def memory_show(services: Services, asker: Asker, *, everything: bool = False) -> None:
    """DM the asker their ten newest memories (seed 000), or all of them, each with where
    it was learned, how many more there are, and whether learning is paused."""
    limit = None if everything else store.RECENT_LIMIT
    async with unit_of_work(services.sessions) as session:
        shown = await store.recent(session, asker.user_id, Why(ACTOR, "show"), limit=limit)
        total = await store.count(session, asker.user_id)
        paused = await consent.paused_since(session, asker.user_id)
    listing = render.listing(
        shown, total=total, paused=paused is not None, here=asker.guild_id, everything=everything
    )
    files: list[Attachment] = []
    if everything and len(listing) > LISTING_INLINE_CHARS:
        name = f"memories-{asker.user_id}.txt"
        files = [Attachment(name, listing.encode(), "text/plain; charset=utf-8")]
        listing = f"All {total} of your memories are in the attached file."
    await _by_dm(services, asker, listing, sent=DM_SENT, files=files)


async def memory_why(services: Services, asker: Asker, memory_id: int) -> None:
    """DM where one of the asker's memories came from: when and where it was learned, a
    jump link per source message, and every later change. No model is asked."""
    async with unit_of_work(services.sessions) as session:
        found = await store.provenance(session, memory_id, Why(ACTOR, "why"), owner=asker.user_id)
    if found is None:
        await _answer(services, asker, render.not_found(memory_id))
        return
    await _by_dm(services, asker, render.provenance(found, here=asker.guild_id), sent=WHY_SENT)


async def memory_search(services: Services, asker: Asker, words: str) -> None:
    """DM the asker their memories that match ``words``, best first, ranked as recall ranks
    them (id, where it was learned, the first 80 characters). No model is asked; one logged
    read. Words that hold nothing to search for get a clear answer and read nothing."""
    query = Query.of([(words, 1.0)])
    if query.empty:
        await _answer(services, asker, NOTHING_TO_SEARCH)
        return
    async with unit_of_work(services.sessions) as session:
        found = await store.search(session, asker.user_id, Why(ACTOR, "search"), query)
    listing = render.search_results(found, words=words, here=asker.guild_id)
    await _by_dm(services, asker, listing, sent=SEARCH_SENT)


async def memory_export(services: Services, asker: Asker) -> None:
    """DM a JSON file of everything kept about the asker: every memory with its origin and
    sources, the pause state, and the ledger history of their memories."""
    async with unit_of_work(services.sessions) as session:
        kept = await store.profile(session, asker.user_id, Why(ACTOR, "export"))
        paused = await consent.paused_since(session, asker.user_id)
    body = export_json(asker.user_id, kept, paused, now=utcnow(), limit=MAX_UPLOAD_BYTES)
    attachment = Attachment(f"memories-{asker.user_id}.json", body, "application/json")
    note = f"Everything I keep about you: {len(kept.memories)} memories and their history."
    await _by_dm(services, asker, note, sent=EXPORT_SENT, files=[attachment])


def export_json(
    user_id: int,
    kept: records.Profile,
    paused: datetime | None,
    *,
    now: datetime,
    limit: int,
) -> bytes:
    """Pure: the export file, within ``limit`` bytes. Memories always fit whole; when the
    ledger history does not, its oldest rows are left out and the file says how many."""
    document: dict[str, Any] = {
        "user_id": str(user_id),
        "exported_at": now.isoformat(),
        "learning_paused": paused is not None,
        "paused_at": paused.isoformat() if paused else None,
        "memories": [render.memory_json(m, kept.sources.get(m.id, [])) for m in kept.memories],
        "ledger": [render.ledger_json(row) for row in kept.ledger],
        "ledger_rows_left_out": 0,
    }
    encoded = json.dumps(document, ensure_ascii=False).encode()
    while len(encoded) > limit and document["ledger"]:
        cut = max(1, len(document["ledger"]) // 10)
        document["ledger"] = document["ledger"][cut:]
        document["ledger_rows_left_out"] += cut
        encoded = json.dumps(document, ensure_ascii=False).encode()
    return encoded


# --- consent ----------------------------------------------------------------------------------


async def memory_pause(services: Services, asker: Asker) -> None:
    async with unit_of_work(services.sessions) as session:
        changed = await consent.pause(session, asker.user_id)
    await _answer(services, asker, PAUSED if changed else ALREADY_PAUSED)


async def memory_resume(services: Services, asker: Asker) -> None:
    async with unit_of_work(services.sessions) as session:
        changed = await consent.resume(session, asker.user_id)
    await _answer(services, asker, RESUMED if changed else NOT_PAUSED)


# --- forget -----------------------------------------------------------------------------------


async def memory_forget(services: Services, asker: Asker, memory_id: int) -> None:
    """Delete one memory if, and only if, it is the asker's own."""
    async with unit_of_work(services.sessions) as session:
        why = Why(ACTOR, "!memory forget")
        gone = await store.delete_one(session, memory_id, why, owner=asker.user_id)
    if gone is None:
        await _answer(services, asker, render.not_found(memory_id))
        return
    await _answer(services, asker, f"Done: I forgot memory {memory_id}.")


async def memory_forget_all(services: Services, asker: Asker) -> None:
    """Delete every memory the asker has, each delete logged with its before state."""
    async with unit_of_work(services.sessions) as session:
        gone = await store.forget_everything(session, asker.user_id, Why(ACTOR, FORGET_ALL))
    text = (
        FORGET_ALL_NONE
        if not gone
        else f"Done: I forgot all {len(gone)} of your memor{'y' if len(gone) == 1 else 'ies'}."
    )
    await _answer(services, asker, text)
