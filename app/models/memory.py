"""Per-person memories and their ledger (owned by app.memory.store alone)."""

from __future__ import annotations

from datetime import date
from typing import Any

from pgvector.sqlalchemy import HALFVEC
from sqlalchemy import (
    BigInteger,
    CheckConstraint,
    Date,
    ForeignKey,
    Identity,
    Index,
    Text,
    UniqueConstraint,
    text,
)
from sqlalchemy.dialects.postgresql import ARRAY, DOUBLE_PRECISION
from sqlalchemy.orm import Mapped, deferred, mapped_column

from app.models.base import Base, CreatedAt, Json, Snowflake, Timestamp
from app.vocabulary import Action, Actor

SOURCES = ("self", "operator", "import")
# Where a memory was learned, which bounds where it may be recalled: a guild (origin_guild_id),
# a DM, or unknown (learned before origins were recorded; treated as private). "any" is only
# the default of a row written by hand: the bot never writes it.
ORIGINS = ("any", "guild", "dm", "unknown")
ACTORS = tuple(actor.value for actor in Actor)
ACTIONS = tuple(action.value for action in Action)
CHANGES = "action <> 'read'"
# A reply prompt's read that found memories: an erasure follows it to the reply those
# memories went into (store.reply_reads), so it stays a row. Every other read may be counted.
FED_A_REPLY = "actor = 'reply' AND trigger IS NOT NULL AND coalesce(after, '[]') <> '[]'"
ROLLUP_CANDIDATES = f"action = 'read' AND NOT ({FED_A_REPLY})"
# The longest vectors the covering index keeps beside their keys (a btree entry holds at most
# 2,704 bytes; a halfvec takes two per dimension): a longer model's vectors are read from the
# table. The index's condition, which a read repeats so that the planner may use it.
VECTOR_INDEX_DIMENSIONS = 1024
VECTOR_INDEX = f"embedding IS NOT NULL AND vector_dims(embedding) <= {VECTOR_INDEX_DIMENSIONS}"


def _one_of(column: str, values: tuple[str, ...]) -> str:
    return f"{column} IN ({', '.join(repr(v) for v in values)})"


class Memory(Base):
    __tablename__ = "memories"

    id: Mapped[int] = mapped_column(BigInteger, Identity(always=False), primary_key=True)
    user_id: Mapped[Snowflake]
    content: Mapped[str] = mapped_column(Text)
    source: Mapped[str] = mapped_column(Text, server_default=text("'self'"))
    origin: Mapped[str] = mapped_column(Text, server_default=text("'any'"))
    origin_guild_id: Mapped[Snowflake | None]
    created_at: Mapped[CreatedAt]
    updated_at: Mapped[CreatedAt]
    # When the nightly decay review last looked at it (reset when its text changes).
    reviewed_at: Mapped[Timestamp | None]
    # The text's tokens (app/kit/tokens.py), written with the text by the store; NULL until
    # the store fills them in (a row written by hand, or its text changed without them).
    search_tokens: Mapped[list[str] | None] = mapped_column(ARRAY(Text))
    # The text's embedding and the space it lives in (app/kit/vectors.py), written by the
    # owner off the critical path or by the back-fill; cleared by a trigger when the text
    # changes without them. Never loaded with the row (raise): read only in SQL.
    embedding: Mapped[Any] = deferred(mapped_column(HALFVEC(), nullable=True), raiseload=True)
    embedding_space: Mapped[str | None] = mapped_column(Text)
    # Its crowd figure (app/memory/store/crowds.py): the mean similarity of its vector to the
    # nearest of the person's others, and the least of those; kept by the owner and the
    # back-fill, cleared by triggers with the vector (migration 0019).
    crowd: Mapped[float | None] = mapped_column(DOUBLE_PRECISION)
    crowd_floor: Mapped[float | None] = mapped_column(DOUBLE_PRECISION)

    __table_args__ = (
        CheckConstraint(_one_of("source", SOURCES), name="source"),
        CheckConstraint(_one_of("origin", ORIGINS), name="origin"),
        CheckConstraint("(origin = 'guild') = (origin_guild_id IS NOT NULL)", name="origin_guild"),
        Index("ix_memories_user_recent", "user_id", text("updated_at DESC")),
        Index("ix_memories_updated_at", "updated_at"),
        Index(
            "ix_memories_search",
            text("search_keys(user_id, search_tokens)"),
            postgresql_using="gin",
            postgresql_with={"fastupdate": "off"},
        ),
        Index("ix_memories_embedding_waiting", "id", postgresql_where=text("embedding IS NULL")),
        Index(
            "ix_memories_embedding_space",
            "embedding_space",
            postgresql_where=text("embedding IS NOT NULL"),
        ),
        # The person's vectors in the order recall reads them, with what it filters and ranks
        # by, and the crowd floor the figures' upkeep checks: an index-only scan, not a heap
        # page per row (migration 0021).
        Index(
            "ix_memories_vectors",
            "user_id",
            "embedding_space",
            text("updated_at DESC"),
            text("id DESC"),
            postgresql_include=["origin", "origin_guild_id", "crowd", "crowd_floor", "embedding"],
            postgresql_where=text(VECTOR_INDEX),
        ),
        Index(
            "ix_memories_crowd_waiting",
            "user_id",
            postgresql_where=text("embedding IS NOT NULL AND crowd_floor IS NULL"),
        ),
        Index(
            "ix_memories_tokens_missing",
            "user_id",
            postgresql_where=text("search_tokens IS NULL"),
        ),
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
        Index("ix_memory_log_user", "user_id", "id"),
        Index("ix_memory_log_memory", "memory_id"),
        # A person's changes without their reads (an export lists every change).
        Index("ix_memory_log_user_changes", "user_id", "id", postgresql_where=text(CHANGES)),
        # The reads LEDGER_READ_ROLLUP_DAYS may fold into counts, oldest first.
        Index("ix_memory_log_rollup", "id", postgresql_where=text(ROLLUP_CANDIDATES)),
        # The write path's "already applied?" check looks up a person's rows by trigger.
        Index(
            "ix_memory_log_user_trigger",
            "user_id",
            "trigger",
            postgresql_where=text("trigger IS NOT NULL"),
        ),
    )


class MemoryReadCount(Base):
    """Ledger reads folded into counts by LEDGER_READ_ROLLUP_DAYS: how many read rows of
    the person's profile an actor wrote in a month (UTC), kept after the rows are removed,
    so an export still reports every read."""

    __tablename__ = "memory_read_counts"

    user_id: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    actor: Mapped[str] = mapped_column(Text, primary_key=True)
    month: Mapped[date] = mapped_column(Date, primary_key=True)  # its first day
    reads: Mapped[int] = mapped_column(BigInteger)


class MemorySource(Base):
    """A message a memory was learned from (provenance): where it was said, and the batch
    (the write path's trigger: a reply, a nightly chunk, a consolidation batch)."""

    __tablename__ = "memory_sources"

    id: Mapped[int] = mapped_column(BigInteger, Identity(always=False), primary_key=True)
    memory_id: Mapped[Snowflake]
    message_id: Mapped[Snowflake]
    channel_id: Mapped[Snowflake]
    guild_id: Mapped[Snowflake | None]
    trigger: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[CreatedAt]

    __table_args__ = (
        UniqueConstraint("memory_id", "message_id"),
        Index("ix_memory_sources_message_id", "message_id"),
    )
