"""Per-person memories, their ledger, and seed 001's pins, episodes and observations."""

from __future__ import annotations

from sqlalchemy import (
    BigInteger,
    CheckConstraint,
    ForeignKey,
    Identity,
    Index,
    Text,
    text,
)
from sqlalchemy.orm import Mapped, mapped_column

from app.models.base import Base, CreatedAt, Json, Snowflake, Timestamp

SOURCES = ("self", "operator", "import")
ACTORS = (
    "extraction",
    "reply",
    "command",
    "nightly",
    "consolidation",
    "staff",
    "retention",
    "forgetme",
)
ACTIONS = ("read", "add", "update", "delete", "rollback")


def _one_of(column: str, values: tuple[str, ...]) -> str:
    return f"{column} IN ({', '.join(repr(v) for v in values)})"


class Memory(Base):
    __tablename__ = "memories"

    id: Mapped[int] = mapped_column(BigInteger, Identity(always=False), primary_key=True)
    user_id: Mapped[Snowflake]
    content: Mapped[str] = mapped_column(Text)
    source: Mapped[str] = mapped_column(Text, server_default=text("'self'"))
    created_at: Mapped[CreatedAt]
    updated_at: Mapped[CreatedAt]

    __table_args__ = (
        CheckConstraint(_one_of("source", SOURCES), name="source"),
        Index("ix_memories_user_recent", "user_id", text("updated_at DESC")),
        Index("ix_memories_updated_at", "updated_at"),
    )


class MemoryLog(Base):
    __tablename__ = "memory_log"

    id: Mapped[int] = mapped_column(BigInteger, Identity(always=False), primary_key=True)
    memory_id: Mapped[int | None] = mapped_column(BigInteger)
    user_id: Mapped[Snowflake]
    actor: Mapped[str] = mapped_column(Text)
    action: Mapped[str] = mapped_column(Text)
    reason: Mapped[str] = mapped_column(Text, server_default=text("''"))
    before: Mapped[Json | None]
    after: Mapped[Json | None]
    run_id: Mapped[int | None] = mapped_column(
        BigInteger, ForeignKey("nightly_runs.id", ondelete="SET NULL")
    )
    trigger: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[CreatedAt]

    __table_args__ = (
        CheckConstraint(_one_of("actor", ACTORS), name="actor"),
        CheckConstraint(_one_of("action", ACTIONS), name="action"),
        Index("ix_memory_log_run", "run_id", "id"),
        Index("ix_memory_log_user", "user_id"),
        Index("ix_memory_log_memory", "memory_id"),
        # The write path's "already applied?" check looks up a person's rows by trigger.
        Index(
            "ix_memory_log_user_trigger",
            "user_id",
            "trigger",
            postgresql_where=text("trigger IS NOT NULL"),
        ),
    )


class Observation(Base):
    __tablename__ = "observations"

    id: Mapped[int] = mapped_column(BigInteger, Identity(always=False), primary_key=True)
    channel_id: Mapped[Snowflake]
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
        Index("ix_observations_user_id", "user_id"),
    )


class Episode(Base):
    __tablename__ = "episodes"

    id: Mapped[int] = mapped_column(BigInteger, Identity(always=False), primary_key=True)
    channel_id: Mapped[Snowflake]
    content: Mapped[str] = mapped_column(Text)
    created_at: Mapped[CreatedAt]

    __table_args__ = (Index("ix_episodes_channel_recent", "channel_id", text("created_at DESC")),)


class Pin(Base):
    __tablename__ = "pins"

    id: Mapped[int] = mapped_column(BigInteger, Identity(always=False), primary_key=True)
    scope: Mapped[str] = mapped_column(Text)
    channel_id: Mapped[Snowflake | None]
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
    )
