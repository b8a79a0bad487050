"""The channel log: both sides of every conversation, edits and deletes applied."""

from __future__ import annotations

from typing import Any

from pgvector.sqlalchemy import HALFVEC
from sqlalchemy import BigInteger, Boolean, Index, Text, text
from sqlalchemy.dialects.postgresql import ARRAY, JSONB
from sqlalchemy.orm import Mapped, deferred, mapped_column

from app.models.base import Base, CreatedAt, Snowflake, Timestamp


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
    # The people the text mentions (`<@id>`), so an erasure finds them by identity.
    mention_ids: Mapped[list[int]] = mapped_column(
        ARRAY(BigInteger), server_default=text("'{}'::bigint[]")
    )
    created_at: Mapped[Timestamp]
    edited_at: Mapped[Timestamp | None]
    deleted_at: Mapped[Timestamp | None]
    # What was attached, by name only ({id, filename, content_type, size}); never the bytes.
    attachments: Mapped[list[dict[str, Any]]] = mapped_column(
        JSONB, server_default=text("'[]'::jsonb")
    )
    # The text's tokens (app/kit/tokens.py), written with the text by the channel log; NULL
    # until the log fills them in (a row written by hand, or its text changed without them).
    search_tokens: Mapped[list[str] | None] = mapped_column(ARRAY(Text))
    # The text's embedding and the space it lives in (app/kit/vectors.py), written by the
    # owner off the critical path or by the back-fill; cleared by a trigger when the text
    # changes without them. Never loaded with the row (raise): read only in SQL.
    embedding: Mapped[Any] = deferred(mapped_column(HALFVEC(), nullable=True), raiseload=True)
    embedding_space: Mapped[str | None] = mapped_column(Text)
    # False for what its author wrote while learning about them was paused, and for the bot's
    # reply to it: older-conversation recall never brings it back.
    recallable: Mapped[bool] = mapped_column(Boolean, server_default=text("true"))

    __table_args__ = (
        Index("ix_messages_channel_recent", "channel_id", text("created_at DESC")),
        Index("ix_messages_created_at", "created_at"),
        Index("ix_messages_author_id", "author_id", "id"),
        Index(
            "ix_messages_reply_to", "reply_to_id", postgresql_where=text("reply_to_id IS NOT NULL")
        ),
        Index("ix_messages_mentions", "mention_ids", postgresql_using="gin"),
        # Whether a display name is one person's alone (an erasure's name rule).
        Index("ix_messages_author_name", text("lower(author_name)")),
        Index(
            "ix_messages_search",
            text("search_keys(channel_id, search_tokens)"),
            postgresql_using="gin",
            postgresql_with={"fastupdate": "off"},
        ),
        Index(
            "ix_messages_embedding_waiting",
            "id",
            postgresql_where=text(
                "embedding IS NULL AND deleted_at IS NULL AND recallable AND content <> ''"
            ),
        ),
        Index(
            "ix_messages_embedding_space",
            "embedding_space",
            postgresql_where=text("embedding IS NOT NULL"),
        ),
        Index(
            "ix_messages_tokens_missing",
            "channel_id",
            postgresql_where=text("search_tokens IS NULL"),
        ),
    )


class MessageTombstone(Base):
    """A delete or an edit that arrived before its message: applied when the message is
    logged, forgotten with the de-duplication window (seven days)."""

    __tablename__ = "message_tombstones"

    message_id: Mapped[Snowflake] = mapped_column(primary_key=True, autoincrement=False)
    channel_id: Mapped[Snowflake]
    author_id: Mapped[Snowflake | None]  # when the edit named it
    content: Mapped[str | None] = mapped_column(Text)  # the newest edit's text
    edited_at: Mapped[Timestamp | None]
    deleted_at: Mapped[Timestamp | None]
    received_at: Mapped[CreatedAt]

    __table_args__ = (
        Index("ix_message_tombstones_received", "received_at"),
        Index(
            "ix_message_tombstones_author",
            "author_id",
            postgresql_where=text("author_id IS NOT NULL"),
        ),
    )
