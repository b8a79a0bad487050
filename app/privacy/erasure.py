"""MEM-09 erasure (`!forgetme`, the admin erase): everything the bot holds from one person,
removed in one transaction through each table's owner.

Deletes their memories, observations, messages (the command itself included) and signals, and
the channel episodes that mention their name; redacts the memory text in their ledger rows and
the message text in recorded gateway payloads. The ledger keeps only THAT memories were erased
(one redacted delete row per memory and one receipt row with the counts), never what."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import asdict, dataclass

from sqlalchemy.ext.asyncio import AsyncSession

from app.agent import session as agent_sessions
from app.channel import log as channel_log
from app.channel import signals
from app.inbound import inbox
from app.memory import consent, store
from app.memory.records import Why
from app.structured import episodes, observations

ACTOR = "forgetme"
REASON = "!forgetme"
RECEIPT_REASON = "!forgetme receipt"
MIN_NAME_CHARS = 2  # a one-letter name would match half the episodes and identify no one
_ASCII_WORD = "A-Za-z0-9_"


@dataclass(frozen=True, slots=True)
class Receipt:
    """What one erasure removed: counts only."""

    memories: int = 0
    messages: int = 0
    observations: int = 0
    signals: int = 0
    episodes: int = 0
    ledger_rows_redacted: int = 0
    events_redacted: int = 0
    agent_sessions: int = 0


# --- pure ----------------------------------------------------------------------------------


def erasure_names(user_id: int, names: Iterable[str | None]) -> list[str]:
    """The strings that identify the person in free text: their names and their mentions."""
    found = {name.strip() for name in names if name and len(name.strip()) >= MIN_NAME_CHARS}
    return sorted(found | {f"<@{user_id}>", f"<@!{user_id}>"})


def mentions_any(content: str, names: Iterable[str]) -> bool:
    """Case-insensitive: an ASCII name must stand as a word ("Al" is not in "also"); other
    names (e.g. Japanese, written without spaces) match anywhere."""
    folded = content.casefold()
    for name in names:
        if name.isascii():
            pattern = rf"(?<![{_ASCII_WORD}]){re.escape(name)}(?![{_ASCII_WORD}])"
            if re.search(pattern, content, flags=re.IGNORECASE):
                return True
        elif name.casefold() in folded:
            return True
    return False


def format_receipt(receipt: Receipt) -> str:
    """Pure: the channel answer. Counts only, so it reveals nothing that was erased."""

    def n(count: int, one: str, many: str) -> str:
        return f"{count} {one if count == 1 else many}"

    return (
        "Done: I erased what I had from you — "
        f"{n(receipt.memories, 'memory', 'memories')}, "
        f"{n(receipt.messages, 'message', 'messages')}, "
        f"{n(receipt.observations, 'observation', 'observations')}, "
        f"{n(receipt.signals, 'reaction/correction', 'reactions/corrections')} and "
        f"{n(receipt.episodes, 'channel summary', 'channel summaries')} mentioning you. "
        "My memory log keeps only that this erasure happened, not what was erased. "
        "I won't learn anything new about you from now on; `!memory resume` turns learning "
        "back on if you change your mind."
    )


# --- the erasure ---------------------------------------------------------------------------


async def erase_user(
    session: AsyncSession,
    user_id: int,
    *,
    names: Iterable[str | None],
    own_event: str | None = None,
) -> Receipt:
    """Erase ``user_id`` inside the caller's transaction, through each table's owner; the
    counts. The memory store takes the person's lock first."""
    why = Why(ACTOR, REASON)
    await store.lock_owners(session, [user_id])
    identifiers = erasure_names(
        user_id, [*names, *await channel_log.author_names(session, user_id)]
    )
    erased = await store.erase_owner(session, user_id, why)

    def mentions(text: str) -> bool:
        return mentions_any(text, identifiers)

    receipt = Receipt(
        memories=erased.memories,
        messages=await channel_log.delete_by_author(session, user_id),
        observations=await observations.delete_by_user(session, user_id),
        signals=await signals.delete_by_user(session, user_id),
        episodes=await episodes.delete_where(session, mentions),
        ledger_rows_redacted=erased.ledger_rows_redacted,
        events_redacted=await inbox.redact_person(session, user_id, keep_event=own_event or ""),
        agent_sessions=await agent_sessions.delete_mentioning(session, mentions),
    )
    await store.record_erasure(session, user_id, Why(ACTOR, RECEIPT_REASON), asdict(receipt))
    # They asked to be forgotten: learning about them again at once would contradict that.
    await consent.pause(session, user_id)
    return receipt
