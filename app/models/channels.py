"""The channel directory: where each channel hangs (a thread's parent) and what the operators
set for it (mode, persona, chat model). Owned by app.directory.store alone."""

from __future__ import annotations

from sqlalchemy import CheckConstraint, Index, Integer, Text
from sqlalchemy.orm import Mapped, mapped_column

from app.models.base import Base, CreatedAt, Snowflake, Timestamp


class Channel(Base):
    __tablename__ = "channels"

    id: Mapped[Snowflake] = mapped_column(primary_key=True, autoincrement=False)
    guild_id: Mapped[Snowflake | None]
    # A thread's parent channel (THREAD_CREATE/UPDATE, or GET /channels/{id}); null otherwise.
    parent_id: Mapped[Snowflake | None]
    name: Mapped[str | None] = mapped_column(Text)
    name_by: Mapped[Snowflake | None]  # whose name it is (a thread's owner), for an erasure
    type: Mapped[int | None] = mapped_column(Integer)  # Discord's channel type, when known
    # Null: not set here (a thread follows its parent, a channel has the default).
    mode: Mapped[str | None] = mapped_column(Text)
    persona: Mapped[str | None] = mapped_column(Text)
    persona_by: Mapped[Snowflake | None]  # who wrote the persona (null: admin API, or none)
    model: Mapped[str | None] = mapped_column(Text)  # one of CHAT_MODELS; null: CHAT_MODEL
    settings_by: Mapped[Snowflake | None]  # the staff member who last set them (null: admin API)
    settings_at: Mapped[Timestamp | None]
    updated_at: Mapped[CreatedAt]

    __table_args__ = (
        CheckConstraint("mode IN ('mention', 'free', 'off')", name="mode"),
        CheckConstraint("char_length(persona) <= 500", name="persona_length"),
        Index("ix_channels_parent_id", "parent_id"),
        Index("ix_channels_persona_by", "persona_by"),
        Index("ix_channels_name_by", "name_by"),
    )
