"""`!memory show | forget <id> | forget all`: a person's own memories, and nobody else's.

The dispatcher parses the command and calls one of these. Answers go to the channel as
a reply to the command; the listing itself only ever goes by DM."""

from __future__ import annotations

import logging
from collections.abc import Sequence

from app.db import unit_of_work
from app.discord.errors import DiscordError
from app.memory import store
from app.memory.store import Why
from app.services import Services

logger = logging.getLogger(__name__)

ACTOR = "command"
PREVIEW_CHARS = 80

DM_FAILED = (
    "I couldn't send you a direct message, so I can't show your memories here. "
    "Allow DMs from this server's members and try `!memory show` again."
)
DM_SENT = "I've sent you a DM with what I remember about you."
NO_MEMORIES = "I don't have any memories about you."
FORGET_ALL_NONE = "I had no memories about you to forget."


def preview(content: str) -> str:
    """The first 80 characters, on one line; an ellipsis says there was more."""
    flat = " ".join(content.split())
    return flat if len(flat) <= PREVIEW_CHARS else flat[:PREVIEW_CHARS] + "…"


def format_listing(memories: Sequence[tuple[int, str]]) -> str:
    """Pure: the DM text for `!memory show`."""
    if not memories:
        return NO_MEMORIES
    lines = [f"`{memory_id}` {preview(content)}" for memory_id, content in memories]
    return (
        "What I remember about you (id, then the note):\n"
        + "\n".join(lines)
        + "\n\nTo remove one: `!memory forget <id>` · everything: `!memory forget all`"
    )


def not_found(memory_id: int) -> str:
    # Identical for "someone else's" and "no such id": ids cannot be probed.
    return f"I couldn't find a memory with id {memory_id} among yours."


async def _answer(services: Services, channel_id: int, trigger_id: int, text: str) -> None:
    await services.discord.send_message(
        channel_id, text, nonce_key=f"memory-cmd:{trigger_id}", reply_to=trigger_id
    )


async def memory_show(
    services: Services, *, author_id: int, channel_id: int, trigger_id: int
) -> None:
    """DM the author up to ten of their memories (read logged with actor `command`)."""
    async with unit_of_work(services.sessions) as session:
        rows = await store.recent(session, author_id, Why(ACTOR, "show"))
    listing = format_listing([(m.id, m.content) for m in rows])
    try:
        await services.discord.send_dm(author_id, listing, nonce_key=f"memory-show:{trigger_id}")
    except DiscordError as exc:
        # Never fall back to the channel with the listing: only say the DM failed.
        logger.info("memory show: DM failed", extra={"user_id": author_id, "error": repr(exc)})
        await _answer(services, channel_id, trigger_id, DM_FAILED)
        return
    await _answer(services, channel_id, trigger_id, DM_SENT)


async def memory_forget(
    services: Services, *, author_id: int, channel_id: int, trigger_id: int, memory_id: int
) -> None:
    """Delete one memory if, and only if, it is the author's own."""
    async with unit_of_work(services.sessions) as session:
        why = Why(ACTOR, "!memory forget")
        gone = await store.delete_one(session, memory_id, why, owner=author_id)
    if gone is None:
        await _answer(services, channel_id, trigger_id, not_found(memory_id))
        return
    await _answer(services, channel_id, trigger_id, f"Done: I forgot memory {memory_id}.")


async def memory_forget_all(
    services: Services, *, author_id: int, channel_id: int, trigger_id: int
) -> None:
    """Delete every memory the author has, each delete logged with its before state."""
    async with unit_of_work(services.sessions) as session:
        gone = await store.delete_owned_by(session, author_id, Why(ACTOR, "!memory forget all"))
    text = (
        FORGET_ALL_NONE
        if not gone
        else f"Done: I forgot all {len(gone)} of your memor{'y' if len(gone) == 1 else 'ies'}."
    )
    await _answer(services, channel_id, trigger_id, text)
