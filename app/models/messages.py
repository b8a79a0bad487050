"""The channel log: both sides of every conversation, edits and deletes applied."""

from __future__ import annotations

from sqlalchemy import Boolean, Index, Text, text
from sqlalchemy.dialects.postgresql import ARRAY
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
    # The text's tokens (app/kit/tokens.py), written with the text by the channel log; NULL
    # until the log fills them in (a row written by hand, or its text changed without them).
    search_tokens: Mapped[list[str] | None] = mapped_column(ARRAY(Text))
    # False for what its author wrote while learning about them was paused, and for the bot's
    # reply to it: older-conversation recall never brings it back.
    recallable: Mapped[bool] = mapped_column(Boolean, server_default=text("true"))

    __table_args__ = (
        Index("ix_messages_channel_recent", "channel_id", text("created_at DESC")),
        Index("ix_messages_created_at", "created_at"),
        Index("ix_messages_author_id", "author_id"),
        Index(
            "ix_messages_search",
            text("search_keys(channel_id, search_tokens)"),
            postgresql_using="gin",
            postgresql_with={"fastupdate": "off"},
        ),
        Index(
            "ix_messages_tokens_missing",
            "channel_id",
            postgresql_where=text("search_tokens IS NULL"),
        ),
    )
