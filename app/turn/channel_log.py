"""The channel log (`messages`): inserts, edits and deletes, each idempotent."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from sqlalchemy import select, update
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.ext.asyncio import AsyncSession

from app.inbound.frames import MessageCreate, MessageUpdate
from app.models import Message

CONTEXT_SIZE = 20


async def log_message(session: AsyncSession, message: MessageCreate) -> bool:
    """Append a message; True the first time, False when it is already logged."""
    result = await session.execute(
        insert(Message)
        .values(
            id=message.id,
            channel_id=message.channel_id,
            guild_id=message.guild_id,
            author_id=message.author.id,
            author_name=message.author_name,
            is_bot=message.author.bot,
            content=message.content,
            reply_to_id=message.reply_to_id,
            created_at=message.timestamp,
        )
        .on_conflict_do_nothing(index_elements=[Message.id])
        .returning(Message.id)
    )
    return result.scalar_one_or_none() is not None


async def log_bot_message(
    session: AsyncSession,
    *,
    message_id: int,
    channel_id: int,
    guild_id: int | None,
    bot_user_id: int,
    bot_name: str,
    content: str,
    reply_to_id: int | None,
    created_at: datetime,
) -> None:
    await session.execute(
        insert(Message)
        .values(
            id=message_id,
            channel_id=channel_id,
            guild_id=guild_id,
            author_id=bot_user_id,
            author_name=bot_name,
            is_bot=True,
            content=content,
            reply_to_id=reply_to_id,
            created_at=created_at,
        )
        .on_conflict_do_nothing(index_elements=[Message.id])
    )


async def apply_edit(session: AsyncSession, edit: MessageUpdate, at: datetime) -> Message | None:
    """Apply an edit's new content; partial updates without content change nothing."""
    if edit.content is None:
        return None
    result = await session.execute(
        update(Message)
        .where(Message.id == edit.id, Message.deleted_at.is_(None))
        .values(content=edit.content, edited_at=edit.edited_timestamp or at)
        .returning(Message)
    )
    return result.scalar_one_or_none()


async def mark_deleted(session: AsyncSession, ids: Sequence[int], at: datetime) -> list[Message]:
    result = await session.execute(
        update(Message)
        .where(Message.id.in_(ids), Message.deleted_at.is_(None))
        .values(deleted_at=at)
        .returning(Message)
    )
    return list(result.scalars())


async def recent_messages(
    session: AsyncSession,
    channel_id: int,
    *,
    limit: int = CONTEXT_SIZE,
    before_id: int | None = None,
) -> list[Message]:
    """The channel's last ``limit`` messages, oldest first, deleted ones excluded."""
    query = select(Message).where(Message.channel_id == channel_id, Message.deleted_at.is_(None))
    if before_id is not None:
        query = query.where(Message.id <= before_id)
    rows = await session.scalars(query.order_by(Message.created_at.desc()).limit(limit))
    return list(reversed(rows.all()))


async def get_message(session: AsyncSession, message_id: int) -> Message | None:
    return await session.get(Message, message_id)
