"""`!memory …` and `/memory …`: a person's own memories, and nobody else's — see them (show,
show all, why, search, export), control learning (pause, resume), remove them (forget <id>,
forget all).

The dispatcher parses the command and calls one of these with its ``Answer``: short answers
are said where the command was given; anything that shows a memory is shown only to the
asker (by DM for a text command, in the ephemeral answer for a slash command), and when it
cannot be the channel learns that, never what."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from contextlib import ExitStack

from sqlalchemy.ext.asyncio import AsyncSession

from app.commands import export, render
from app.commands.answer import DM_FAILED, MAX_FILES, TOO_LARGE, Answer, Part
from app.commands.invocation import Invocation
from app.consent import store as consent
from app.db import unit_of_work
from app.discord.client import MAX_UPLOAD_BYTES, Attachment
from app.kit.parts import Spooled, TextFiles, TooLarge
from app.kit.relevance import Query
from app.meaning.query import query_vector
from app.memory import store
from app.memory.records import Why
from app.services import Services
from app.vocabulary import Actor

logger = logging.getLogger(__name__)

ACTOR = Actor.COMMAND
# `show all` goes as a text file instead of several messages past this many characters.
LISTING_INLINE_CHARS = 6000

DM_SENT = "I've sent you a DM with what I remember about you."
WHY_SENT = "I've sent you a DM with where that memory came from."
SEARCH_SENT = "I've sent you a DM with the memories that match."
NOTHING_TO_SEARCH = "I couldn't find any words to search for in that. Try `!memory search <words>`."
EXPORT_SENT = "I've sent you a DM with everything I keep about you, as JSON."
FORGET_ALL_NONE = "I had no memories about you to forget."
FORGET_ALL = "!memory forget all"
PAUSED = (
    "Paused: I won't learn anything new about you until you say `!memory resume`. "
    "I still use what I already remember; `!memory forget all` removes it."
)
ALREADY_PAUSED = "Learning about you was already paused. `!memory resume` turns it back on."
RESUMED = "Resumed: I'll learn from our conversations again."
NOT_PAUSED = "Learning about you is on; nothing to resume."


def _attached(
    spooled: Sequence[Spooled], name: Callable[[int], str], content_type: str, first: str
) -> list[Part]:
    """One message per file (Discord's limit is per message); ``first`` opens the first."""
    count = len(spooled)

    def message(part: Spooled) -> Part:
        text = first if part.number == 1 else ""
        if count > 1:
            text = f"{text} (file {part.number} of {count})".strip()
        return Part(text, lambda: Attachment(name(part.number), part.read(), content_type))

    return [message(part) for part in spooled]


def _file_name(user_id: int, extension: str) -> Callable[[int], str]:
    """``memories-<user_id>.<extension>``, then ``memories-<user_id>-2.<extension>``, …"""
    return lambda n: f"memories-{user_id}{'' if n == 1 else f'-{n}'}.{extension}"


# --- see ------------------------------------------------------------------------------------


async def memory_show(
    services: Services, asker: Invocation, answer: Answer, *, everything: bool = False
) -> None:
    """DM the asker their ten newest memories (seed 000), or all of them, each with where
    it was learned, how many more there are, and whether learning is paused."""
    if everything:
        await _show_all(services, asker, answer)
        return
    async with unit_of_work(services.sessions) as session:
        shown = await store.recent(session, asker.user_id, Why(ACTOR, "show"))
        total = await store.count(session, asker.user_id)
        paused = await consent.paused_since(session, asker.user_id)
    listing = render.listing(shown, total=total, paused=paused is not None, here=asker.guild_id)
    await answer.show([Part(listing)], sent=DM_SENT, undeliverable=DM_FAILED)


async def _show_all(services: Services, asker: Invocation, answer: Answer) -> None:
    """Every memory, read a page at a time into text files: sent inline when short, as
    files when long, and refused when even the files would be too large for Discord."""
    with TextFiles(limit=MAX_UPLOAD_BYTES, max_files=MAX_FILES) as out:
        async with unit_of_work(services.sessions) as session:
            total = await store.read_everything(session, asker.user_id, Why(ACTOR, "show"))
            paused = await consent.paused_since(session, asker.user_id) is not None
            fits = total == 0 or await _write_listing(session, asker, out, paused=paused)
        if not fits:
            await answer.say(TOO_LARGE)
            return
        if total == 0:
            parts = [Part(render.listing([], total=0, paused=paused, here=asker.guild_id))]
        elif out.size <= LISTING_INLINE_CHARS:
            [whole] = out.finish()
            parts = [Part(whole.read().decode().rstrip("\n"))]
        else:
            first = f"All {total} of your memories are in the attached file."
            name = _file_name(asker.user_id, "txt")
            parts = _attached(out.finish(), name, "text/plain; charset=utf-8", first)
        await answer.show(parts, sent=DM_SENT, undeliverable=DM_FAILED)


async def _write_listing(
    session: AsyncSession, asker: Invocation, out: TextFiles, *, paused: bool
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


async def memory_why(services: Services, asker: Invocation, answer: Answer, memory_id: int) -> None:
    """DM where one of the asker's memories came from: when and where it was learned, a
    jump link per source message, and every later change. No model is asked."""
    async with unit_of_work(services.sessions) as session:
        found = await store.provenance(session, memory_id, Why(ACTOR, "why"), owner=asker.user_id)
    if found is None:
        await answer.say(render.not_found(memory_id))
        return
    text = render.provenance(found, here=asker.guild_id)
    await answer.show([Part(text)], sent=WHY_SENT, undeliverable=DM_FAILED)


async def memory_search(services: Services, asker: Invocation, answer: Answer, words: str) -> None:
    """DM the asker their memories that match ``words`` (by meaning too, with embeddings),
    best first, ranked as recall ranks them (id, where it was learned, the first 80
    characters). No model is asked; one logged
    read. Words that hold nothing to search for get a clear answer and read nothing."""
    query = Query.of([(words, 1.0)])
    if query.empty:
        await answer.say(NOTHING_TO_SEARCH)
        return
    timeout_s = services.settings.embeddings_query_timeout_s
    meaning = await query_vector(services.embedder, words, timeout_s=timeout_s)
    async with unit_of_work(services.sessions) as session:
        found = await store.search(
            session, asker.user_id, Why(ACTOR, "search"), query, meaning=meaning
        )
    listing = render.search_results(found, words=words, here=asker.guild_id)
    await answer.show([Part(listing)], sent=SEARCH_SENT, undeliverable=DM_FAILED)


async def memory_export(services: Services, asker: Invocation, answer: Answer) -> None:
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
            await answer.say(TOO_LARGE)
            return
        first = (
            f"Everything I keep about you: {exported.memories} memories, the "
            f"{exported.changes} changes to them, and how often they were read (per month)."
        )
        name = _file_name(asker.user_id, "json")
        parts = _attached(exported.files, name, "application/json", first)
        await answer.show(parts, sent=EXPORT_SENT, undeliverable=DM_FAILED)


# --- consent ----------------------------------------------------------------------------------


async def memory_pause(services: Services, asker: Invocation, answer: Answer) -> None:
    async with unit_of_work(services.sessions) as session:
        changed = await consent.pause(session, asker.user_id)
    await answer.say(PAUSED if changed else ALREADY_PAUSED)


async def memory_resume(services: Services, asker: Invocation, answer: Answer) -> None:
    async with unit_of_work(services.sessions) as session:
        changed = await consent.resume(session, asker.user_id)
    await answer.say(RESUMED if changed else NOT_PAUSED)


# --- forget -----------------------------------------------------------------------------------


async def memory_forget(
    services: Services, asker: Invocation, answer: Answer, memory_id: int
) -> None:
    """Delete one memory if, and only if, it is the asker's own."""
    async with unit_of_work(services.sessions) as session:
        why = Why(ACTOR, "!memory forget")
        gone = await store.delete_one(session, memory_id, why, owner=asker.user_id)
    if gone is None:
        await answer.say(render.not_found(memory_id))
        return
    await answer.say(f"Done: I forgot memory {memory_id}.")


async def memory_forget_all(services: Services, asker: Invocation, answer: Answer) -> None:
    """Delete every memory the asker has, each delete logged with its before state."""
    async with unit_of_work(services.sessions) as session:
        gone = await store.forget_everything(session, asker.user_id, Why(ACTOR, FORGET_ALL))
    text = (
        FORGET_ALL_NONE
        if not gone
        else f"Done: I forgot all {len(gone)} of your memor{'y' if len(gone) == 1 else 'ies'}."
    )
    await answer.say(text)
