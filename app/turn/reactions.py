"""Reaction events: signals on the bot's messages (seed 002, "Signals after the reply")."""

from __future__ import annotations

import logging

from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.ext.asyncio import AsyncSession

from app.inbound.frames import EventData, ReactionAdd
from app.models import Signal
from app.turn.channel_log import get_message

log = logging.getLogger(__name__)


async def record_reaction(session: AsyncSession, data: EventData, bot_id: int) -> None:
    """Only an add can become a signal; removals never take a signal back."""
    if isinstance(data, ReactionAdd):
        await record_reaction_signal(session, data, bot_id)


async def record_reaction_signal(session: AsyncSession, reaction: ReactionAdd, bot_id: int) -> bool:
    """Store a reaction someone else put on a bot-authored message; True when new."""
    if reaction.user_id == bot_id or not await _authored_by_bot(session, reaction, bot_id):
        return False
    return await add_signal(
        session,
        message_id=reaction.message_id,
        user_id=reaction.user_id,
        kind="reaction",
        value=reaction.emoji.value,
    )


async def _authored_by_bot(session: AsyncSession, reaction: ReactionAdd, bot_id: int) -> bool:
    if reaction.message_author_id is not None:
        return reaction.message_author_id == bot_id
    message = await get_message(session, reaction.message_id)
    return message is not None and message.author_id == bot_id


async def add_signal(
    session: AsyncSession, *, message_id: int, user_id: int, kind: str, value: str
) -> bool:
    """Insert once: the unique (message_id, user_id, kind, value) makes replays no-ops."""
    result = await session.execute(
        insert(Signal)
        .values(message_id=message_id, user_id=user_id, kind=kind, value=value)
        .on_conflict_do_nothing()
        .returning(Signal.id)
    )
    return result.scalar_one_or_none() is not None
