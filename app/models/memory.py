"""Per-person memories and their ledger (owned by app.memory.store alone)."""

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

from app.models.base import Base, CreatedAt, Json, Snowflake

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
