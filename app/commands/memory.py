"""`!memory …`: a person's own memories, and nobody else's — see them (show, show all, why,
search, export), control learning (pause, resume), remove them (forget <id>, forget all).

The dispatcher parses the command and calls one of these. Short answers go to the channel as
a reply to the command; anything that shows a memory goes only by DM, and when the DM cannot
be delivered the channel learns that, never what."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from contextlib import ExitStack
from dataclasses import dataclass

from sqlalchemy.ext.asyncio import AsyncSession

from app.commands import export, render
from app.consent import store as consent
from app.db import unit_of_work
from app.discord.client import MAX_UPLOAD_BYTES, Attachment
from app.discord.errors import DiscordError, DiscordTooLarge
from app.frames.events import MessageCreate
from app.kit.parts import Spooled, TextFiles, TooLarge
from app.kit.relevance import Query
from app.memory import store
from app.memory.records import Why
from app.services import Services
from app.vocabulary import Actor

logger = logging.getLogger(__name__)

ACTOR = Actor.COMMAND
# `show all` goes as a text file instead of several DMs past this many characters.
LISTING_INLINE_CHARS = 6000
# A long listing or export goes as at most this many DMs of one file each (Discord takes
# MAX_UPLOAD_BYTES per message), or not at all.
MAX_FILES = 3

DM_FAILED = (
    "I couldn't send you a direct message, so I can't show your memories here. "
    "Allow DMs from this server's members and try again."
)
DM_SENT = "I've sent you a DM with what I remember about you."
WHY_SENT = "I've sent you a DM with where that memory came from."
SEARCH_SENT = "I've sent you a DM with the memories that match."
NOTHING_TO_SEARCH = "I couldn't find any words to search for in that. Try `!memory search <words>`."
EXPORT_SENT = "I've sent you a DM with everything I keep about you, as JSON."
TOO_LARGE = (
    f"That is too large to send over Discord (more than {MAX_FILES} files of "
    f"{MAX_UPLOAD_BYTES // 2**20} MiB). Ask an operator for the admin export."
)
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


@dataclass(frozen=True, slots=True)
class Dm:
    """One direct message: its text and, read only when it is sent, its file."""

    text: str
    file: Callable[[], Attachment] | None = None


async def _by_dm(services: Services, asker: Asker, dms: Sequence[Dm], *, sent: str) -> None:
    """DM the asker, message by message; the channel hears only that it was sent, that it
    could not be, or that it was too large for Discord (never retried: it cannot help)."""
    try:
        for number, dm in enumerate(dms, start=1):
            key = f"memory-dm:{asker.trigger_id}" + (f":{number}" if number > 1 else "")
            files = [dm.file()] if dm.file is not None else []
            await services.discord.send_dm(asker.user_id, dm.text, nonce_key=key, files=files)
    except DiscordTooLarge:
        await _answer(services, asker, TOO_LARGE)
        return
    except DiscordError as exc:
        # Never fall back to the channel with the content: only say the DM failed.
        logger.info("memory command: DM failed", extra={"error": type(exc).__name__})
        await _answer(services, asker, DM_FAILED)
        return
    await _answer(services, asker, sent)


def _attached(
    spooled: Sequence[Spooled], name: Callable[[int], str], content_type: str, first: str
) -> list[Dm]:
    """One DM per file (Discord's limit is per message); ``first`` opens the first."""
    count = len(spooled)

    def dm(part: Spooled) -> Dm:
        text = first if part.number == 1 else ""
        if count > 1:
            text = f"{text} (file {part.number} of {count})".strip()
        return Dm(text, lambda: Attachment(name(part.number), part.read(), content_type))

    return [dm(part) for part in spooled]


def _file_name(user_id: int, extension: str) -> Callable[[int], str]:
    """``memories-<user_id>.<extension>``, then ``memories-<user_id>-2.<extension>``, …"""
    return lambda n: f"memories-{user_id}{'' if n == 1 else f'-{n}'}.{extension}"


# --- see ------------------------------------------------------------------------------------


async def memory_show(services: Services, asker: Asker, *, everything: bool = False) -> None:
    """DM the asker their ten newest memories (seed 000), or all of them, each with where
    it was learned, how many more there are, and whether learning is paused."""
    if everything:
        await _show_all(services, asker)
        return
    async with unit_of_work(services.sessions) as session:
        shown = await store.recent(session, asker.user_id, Why(ACTOR, "show"))
        total = await store.count(session, asker.user_id)
        paused = await consent.paused_since(session, asker.user_id)
    listing = render.listing(shown, total=total, paused=paused is not None, here=asker.guild_id)
    await _by_dm(services, asker, [Dm(listing)], sent=DM_SENT)


async def _show_all(services: Services, asker: Asker) -> None:
    """Every memory, read a page at a time into text files: sent inline when short, as
    files when long, and refused when even the files would be too large for Discord."""
    with TextFiles(limit=MAX_UPLOAD_BYTES, max_files=MAX_FILES) as out:
        async with unit_of_work(services.sessions) as session:
            total = await store.read_everything(session, asker.user_id, Why(ACTOR, "show"))
            paused = await consent.paused_since(session, asker.user_id) is not None
            fits = total == 0 or await _write_listing(session, asker, out, paused=paused)
        if not fits:
            await _answer(services, asker, TOO_LARGE)
            return
        if total == 0:
            dms = [Dm(render.listing([], total=0, paused=paused, here=asker.guild_id))]
        elif out.size <= LISTING_INLINE_CHARS:
            [whole] = out.finish()
            dms = [Dm(whole.read().decode().rstrip("\n"))]
        else:
            first = f"All {total} of your memories are in the attached file."
            name = _file_name(asker.user_id, "txt")
            dms = _attached(out.finish(), name, "text/plain; charset=utf-8", first)
        await _by_dm(services, asker, dms, sent=DM_SENT)


async def _write_listing(
    session: AsyncSession, asker: Asker, out: TextFiles, *, paused: bool
) -> bool:
    """The `show all` listing into ``out``, page by page, off the event loop; False when
    it does not fit."""
    try:
        out.add([render.listing_heading(everything=True)])
        async for page in store.memory_pages(session, asker.user_id):
            lines = (render.listing_line(m, asker.guild_id) for m in page)
            await asyncio.to_thread(out.add, lines)
        out.add(render.listing_footer(more=0, paused=paused))
    except TooLarge:
        return False
    return True


async def memory_why(services: Services, asker: Asker, memory_id: int) -> None:
    """DM where one of the asker's memories came from: when and where it was learned, a
    jump link per source message, and every later change. No model is asked."""
    async with unit_of_work(services.sessions) as session:
        found = await store.provenance(session, memory_id, Why(ACTOR, "why"), owner=asker.user_id)
    if found is None:
        await _answer(services, asker, render.not_found(memory_id))
        return
    text = render.provenance(found, here=asker.guild_id)
    await _by_dm(services, asker, [Dm(text)], sent=WHY_SENT)


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
    await _by_dm(services, asker, [Dm(listing)], sent=SEARCH_SENT)


async def memory_export(services: Services, asker: Asker) -> None:
    """DM JSON files of everything kept about the asker (app/commands/export.py), each under
    Discord's limit; refused once, with no retry, when even the files would be too large."""
    with ExitStack() as spool:
        async with unit_of_work(services.sessions) as session:
            try:
                exported = await export.export_profile(
                    session,
                    asker.user_id,
                    Why(ACTOR, "export"),
                    spool,
                    limit=MAX_UPLOAD_BYTES,
                    max_files=MAX_FILES,
                )
            except TooLarge:
                exported = None  # the read is still logged: it happened
        if exported is None:
            await _answer(services, asker, TOO_LARGE)
            return
        first = (
            f"Everything I keep about you: {exported.memories} memories, the "
            f"{exported.changes} changes to them, and how often they were read (per month)."
        )
        name = _file_name(asker.user_id, "json")
        dms = _attached(exported.files, name, "application/json", first)
        await _by_dm(services, asker, dms, sent=EXPORT_SENT)


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
