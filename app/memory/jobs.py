"""Job bodies for memory work; app/worker.py registers them with ARQ and passes Services."""

from __future__ import annotations

import logging
from collections.abc import Sequence

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from app.kit.logs import log_context
from app.memory.exchange import Exchange, Line
from app.memory.write_path import WriteOutcome, run_write_path
from app.models.messages import Message
from app.services import Services

logger = logging.getLogger(__name__)

EXCHANGE_SIZE = 6


async def remember_after_reply(
    services: Services,
    *,
    channel_id: int,
    trigger_message_id: int,
    reply_message_id: int | None,
    speaker_id: int,
) -> WriteOutcome:
    """Extraction after a reply: the channel's last six messages up to the bot's reply."""
    if not services.settings.memory_active:
        return WriteOutcome(stopped="memory_off")
    with log_context(channel_id=channel_id, trigger_id=trigger_message_id):
        async with services.sessions() as session:
            messages = await exchange_messages(
                session,
                channel_id=channel_id,
                trigger_message_id=trigger_message_id,
                reply_message_id=reply_message_id,
            )
        exchange = build_exchange(messages, speaker_id=speaker_id)
        outcome = await run_write_path(
            services, exchange, actor="extraction", trigger=f"reply:{trigger_message_id}"
        )
        logger.info(
            "memory extraction done",
            extra={
                "stopped": outcome.stopped,
                "added": outcome.added,
                "updated": outcome.updated,
                "deleted": outcome.deleted,
                "discarded": len(outcome.discarded),
                "skipped": outcome.skipped,
            },
        )
        return outcome


async def exchange_messages(
    session: AsyncSession,
    *,
    channel_id: int,
    trigger_message_id: int,
    reply_message_id: int | None,
) -> list[Message]:
    """Up to six live messages, oldest first, ending at the reply (or the trigger).

    The trigger always stays in: if more than four messages came between it and the reply,
    it takes the oldest slot."""
    anchor_ids = [i for i in (reply_message_id, trigger_message_id) if i is not None]
    anchors = {
        m.id: m
        for m in await session.scalars(
            select(Message).where(Message.id.in_(anchor_ids), Message.channel_id == channel_id)
        )
    }
    end = anchors.get(reply_message_id or 0) or anchors.get(trigger_message_id)
    if end is None:
        return []
    query = (
        select(Message)
        .where(
            Message.channel_id == channel_id,
            Message.deleted_at.is_(None),
            (Message.created_at < end.created_at)
            | ((Message.created_at == end.created_at) & (Message.id <= end.id)),
        )
        .order_by(Message.created_at.desc(), Message.id.desc())
        .limit(EXCHANGE_SIZE)
    )
    recent = list(reversed((await session.scalars(query)).all()))
    trigger = anchors.get(trigger_message_id)
    if trigger is not None and trigger.deleted_at is None and trigger not in recent:
        recent = [trigger, *recent[-(EXCHANGE_SIZE - 1) :]]
    return recent


def build_exchange(messages: Sequence[Message], *, speaker_id: int) -> Exchange:
    """Pure: rows to an Exchange; the speaker's name is the one on their newest line."""
    lines = tuple(Line(m.author_id, m.author_name, m.is_bot, m.content) for m in messages)
    names = [line.author_name for line in lines if line.author_id == speaker_id]
    return Exchange(
        speaker_id=speaker_id,
        speaker_name=names[-1] if names else str(speaker_id),
        lines=lines,
    )
