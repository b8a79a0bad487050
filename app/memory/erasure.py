"""MEM-09 `!forgetme`: erase everything the bot holds from one person, in one transaction.

Deletes their memories, observations, messages (the command itself included) and signals, and
the channel episodes that mention their name; redacts the memory text in their ledger rows and
the message text in recorded gateway payloads. The ledger keeps only THAT memories were erased
(one redacted delete row per memory and one receipt row with the counts), never what."""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from datetime import datetime
from typing import Any, cast

from sqlalchemy import CursorResult, Executable, delete, exists, select, text
from sqlalchemy.ext.asyncio import AsyncSession

from app.db import unit_of_work
from app.inbound.frames import MessageCreate
from app.memory import ledger, repository
from app.models.agent import AgentSession
from app.models.memory import Episode, MemoryLog, Observation
from app.models.messages import Message
from app.models.signals import Signal
from app.services import Services

logger = logging.getLogger(__name__)

ACTOR = "forgetme"
REASON = "!forgetme"
RECEIPT_REASON = "!forgetme receipt"
REDACTED = {"redacted": True}
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
        "My memory log keeps only that this erasure happened, not what was erased."
    )


# --- the erasure ---------------------------------------------------------------------------

_REDACT_LEDGER = text(
    """
    WITH target AS (
        SELECT id,
               CASE WHEN coalesce(jsonb_typeof(before), 'null') = 'null' THEN before
                    ELSE CAST(:marker AS jsonb) END AS new_before,
               CASE WHEN coalesce(jsonb_typeof(after), 'null') = 'null' THEN after
                    WHEN action = 'read' AND jsonb_typeof(after) = 'array' THEN after
                    ELSE CAST(:marker AS jsonb) END AS new_after
        FROM memory_log
        WHERE user_id = :user_id AND actor <> 'forgetme'
    )
    UPDATE memory_log AS l SET before = t.new_before, after = t.new_after
    FROM target AS t
    WHERE l.id = t.id
      AND (l.before IS DISTINCT FROM t.new_before OR l.after IS DISTINCT FROM t.new_after)
    """
)

# Recorded gateway frames keep message text for seven days (de-duplication); blank the
# person's text there too, keeping the rows so a replayed event is still recognised. The
# command's own frame is left alone: a retried job must still parse it as `!forgetme`.
_REDACT_OWN_EVENTS = text(
    """
    UPDATE inbox SET payload = jsonb_set(payload, '{d,content}', '""')
    WHERE payload #>> '{d,author,id}' = :user_id AND id <> :own_event
      AND coalesce(payload #>> '{d,content}', '') <> ''
    """
)
_REDACT_QUOTED_EVENTS = text(
    """
    UPDATE inbox SET payload = jsonb_set(payload, '{d,referenced_message,content}', '""')
    WHERE payload #>> '{d,referenced_message,author,id}' = :user_id
      AND coalesce(payload #>> '{d,referenced_message,content}', '') <> ''
    """
)


async def erase_user(
    session: AsyncSession, user_id: int, *, names: Iterable[str | None], own_event: str
) -> Receipt:
    """Erase ``user_id`` inside the caller's transaction; the counts. Takes the per-user lock."""
    await repository.lock_user(session, user_id)
    logged_names = await session.scalars(
        select(Message.author_name).where(Message.author_id == user_id).distinct()
    )
    identifiers = erasure_names(user_id, [*names, *logged_names])
    memories = await repository.delete_all_owned(session, user_id)
    marker = json.dumps(REDACTED)
    ledger_redacted = await _rowcount(
        session, _REDACT_LEDGER, {"user_id": user_id, "marker": marker}
    )
    for memory in memories:
        await ledger.log_change(
            session,
            action="delete",
            memory_id=memory.id,
            user_id=user_id,
            actor=ACTOR,
            reason=REASON,
            before=dict(REDACTED),
            after=None,
        )
    receipt = Receipt(
        memories=len(memories),
        messages=await _rowcount(session, delete(Message).where(Message.author_id == user_id)),
        observations=await _rowcount(
            session, delete(Observation).where(Observation.user_id == user_id)
        ),
        signals=await _rowcount(session, delete(Signal).where(Signal.user_id == user_id)),
        episodes=await _delete_episodes(session, identifiers),
        ledger_rows_redacted=ledger_redacted,
        events_redacted=await _redact_events(session, user_id, own_event),
        agent_sessions=await _delete_agent_sessions(session, identifiers),
    )
    session.add(
        MemoryLog(
            memory_id=None,
            user_id=user_id,
            actor=ACTOR,
            action="delete",
            reason=RECEIPT_REASON,
            before=None,
            after=asdict(receipt),
        )
    )
    await session.flush()
    return receipt


async def _rowcount(
    session: AsyncSession, statement: Executable, args: dict[str, object] | None = None
) -> int:
    result = cast(CursorResult[Any], await session.execute(statement, args))
    return int(result.rowcount)


async def _delete_episodes(session: AsyncSession, identifiers: list[str]) -> int:
    # Episodes are capped per channel, so reading them all is bounded by the channel count.
    rows = (await session.execute(select(Episode.id, Episode.content))).all()
    doomed = [episode_id for episode_id, content in rows if mentions_any(content, identifiers)]
    if not doomed:
        return 0
    return await _rowcount(session, delete(Episode).where(Episode.id.in_(doomed)))


async def _delete_agent_sessions(session: AsyncSession, identifiers: list[str]) -> int:
    # A task session quotes the channel's lines "Name: text" and names who asked: a session
    # that mentions the person is forgotten whole (one per channel, so this read is bounded).
    rows = (await session.execute(select(AgentSession.channel_id, AgentSession.history))).all()
    doomed = [
        channel_id
        for channel_id, history in rows
        if mentions_any(json.dumps(history, ensure_ascii=False), identifiers)
    ]
    if not doomed:
        return 0
    return await _rowcount(session, delete(AgentSession).where(AgentSession.channel_id.in_(doomed)))


async def _redact_events(session: AsyncSession, user_id: int, own_event: str) -> int:
    args: dict[str, object] = {"user_id": str(user_id), "own_event": own_event}
    own = await _rowcount(session, _REDACT_OWN_EVENTS, args)
    quoted = await _rowcount(session, _REDACT_QUOTED_EVENTS, {"user_id": str(user_id)})
    return own + quoted


async def erased_since(session: AsyncSession, user_id: int, since: datetime) -> bool:
    """True when ``user_id`` used `!forgetme` at or after ``since``. A writer that read the
    person's words before taking their lock checks this under the lock, so an extraction in
    flight during an erasure cannot write a memory back."""
    query = select(
        exists().where(
            MemoryLog.user_id == user_id,
            MemoryLog.actor == ACTOR,
            MemoryLog.memory_id.is_(None),
            MemoryLog.created_at >= since,
        )
    )
    return bool((await session.execute(query)).scalar_one())


async def forget_me(services: Services, message: MessageCreate) -> None:
    """`!forgetme`: erase the author, then answer in the channel with the counts."""
    author = message.author
    names = [message.author_name, author.username, author.global_name]
    if message.member is not None:
        names.append(message.member.nick)
    async with unit_of_work(services.sessions) as session:
        # A MESSAGE_CREATE's de-duplication id is the message id.
        receipt = await erase_user(session, author.id, names=names, own_event=str(message.id))
    ledger.count_changes(ACTOR, "delete", receipt.memories)
    logger.info("forgetme: erased", extra={"user_id": author.id, **asdict(receipt)})
    await services.discord.send_message(
        message.channel_id,
        format_receipt(receipt),
        nonce_key=f"forgetme:{message.id}",
        reply_to=message.id,
    )
