"""Seed 001's structured memory tables: observations, episodes and operator pins."""

from __future__ import annotations

from sqlalchemy import BigInteger, CheckConstraint, Identity, Index, Text, text
from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.orm import Mapped, mapped_column

from app.models.base import Base, CreatedAt, Snowflake, Timestamp


class Observation(Base):
    __tablename__ = "observations"

    id: Mapped[int] = mapped_column(BigInteger, Identity(always=False), primary_key=True)
    channel_id: Mapped[Snowflake]
    guild_id: Mapped[Snowflake | None]
    user_id: Mapped[Snowflake]
    kind: Mapped[str] = mapped_column(Text)
    message_id: Mapped[Snowflake | None]
    content: Mapped[str] = mapped_column(Text, server_default=text("''"))
    event_id: Mapped[str | None] = mapped_column(Text, unique=True)
    created_at: Mapped[CreatedAt]
    consumed_at: Mapped[Timestamp | None]

    __table_args__ = (
        Index(
            "ix_observations_unconsumed",
            "channel_id",
            "id",
            postgresql_where=text("consumed_at IS NULL"),
        ),
        Index("ix_observations_user_id", "user_id", "id"),
        Index("ix_observations_message", "message_id"),
        Index("ix_observations_channel", "channel_id"),
    )


class Episode(Base):
    __tablename__ = "episodes"

    id: Mapped[int] = mapped_column(BigInteger, Identity(always=False), primary_key=True)
    channel_id: Mapped[Snowflake]
    guild_id: Mapped[Snowflake | None]
    content: Mapped[str] = mapped_column(Text)
    # Provenance: everyone whose words or activity the episode was made from (its previous
    # episode's included). NULL: made before provenance was recorded.
    source_user_ids: Mapped[list[int] | None] = mapped_column(ARRAY(BigInteger))
    created_at: Mapped[CreatedAt]

    __table_args__ = (
        Index("ix_episodes_channel_recent", "channel_id", text("created_at DESC")),
        Index("ix_episodes_sources", "source_user_ids", postgresql_using="gin"),
    )


class Pin(Base):
    __tablename__ = "pins"

    id: Mapped[int] = mapped_column(BigInteger, Identity(always=False), primary_key=True)
    scope: Mapped[str] = mapped_column(Text)
    channel_id: Mapped[Snowflake | None]
    # The guild of a channel pin's channel: only that guild's staff remove it (NULL: a
    # global pin, a DM channel's, or one whose guild was not known when it was migrated).
    guild_id: Mapped[Snowflake | None]
    content: Mapped[str] = mapped_column(Text)
    source: Mapped[str] = mapped_column(Text, server_default=text("'operator'"))
    created_by: Mapped[Snowflake]
    created_at: Mapped[CreatedAt]

    __table_args__ = (
        CheckConstraint("scope IN ('global', 'channel')", name="scope"),
        CheckConstraint(
            "(scope = 'global' AND channel_id IS NULL)"
            " OR (scope = 'channel' AND channel_id IS NOT NULL)",
            name="scope_channel",
        ),
        Index("ix_pins_channel", "channel_id"),
        Index("ix_pins_created_by", "created_by"),
    )
