"""The channel log: both sides of every conversation, edits and deletes applied."""

from __future__ import annotations

from typing import Any

from sqlalchemy import Boolean, Index, Text, text
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.orm import Mapped, mapped_column

from app.models.base import Base, Snowflake, Timestamp


class Message(Base):
    __tablename__ = "messages"

    id: Mapped[Snowflake] = mapped_column(primary_key=True, autoincrement=False)
    channel_id: Mapped[Snowflake]
    guild_id: Mapped[Snowflake | None]
    author_id: Mapped[Snowflake]
    author_name: Mapped[str] = mapped_column(Text)
    is_bot: Mapped[bool] = mapped_column(Boolean, server_default=text("false"))
    content: Mapped[str] = mapped_column(Text)
    reply_to_id: Mapped[Snowflake | None]
    created_at: Mapped[Timestamp]
    edited_at: Mapped[Timestamp | None]
    deleted_at: Mapped[Timestamp | None]
    # What was attached, by name only ({id, filename, content_type, size}); never the bytes.
    attachments: Mapped[list[dict[str, Any]]] = mapped_column(
        JSONB, server_default=text("'[]'::jsonb")
    )

    __table_args__ = (
        Index("ix_messages_channel_recent", "channel_id", text("created_at DESC")),
        Index("ix_messages_created_at", "created_at"),
        Index("ix_messages_author_id", "author_id"),
    )
