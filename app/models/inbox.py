"""The inbox: every acknowledged gateway event, keyed by its de-duplication id."""

from __future__ import annotations

from sqlalchemy import Index, Integer, Text, text
from sqlalchemy.orm import Mapped, mapped_column

from app.models.base import Base, CreatedAt, Json, Snowflake, Timestamp


class InboxEvent(Base):
    __tablename__ = "inbox"

    id: Mapped[str] = mapped_column(Text, primary_key=True)
    event_type: Mapped[str] = mapped_column(Text)
    payload: Mapped[Json] = mapped_column(nullable=False)
    received_at: Mapped[CreatedAt]
    handled_at: Mapped[Timestamp | None]
    attempts: Mapped[int] = mapped_column(Integer, server_default=text("0"))
    # Retries back off by attempt; an event given up is dead (not handled) until replayed.
    next_attempt_at: Mapped[Timestamp | None]
    last_error: Mapped[str | None] = mapped_column(Text)  # the exception's type name only
    dead_at: Mapped[Timestamp | None]
    # Who and what the frame is about (from its data, at the webhook): an erasure finds a
    # person's frames by identity, never by searching their text.
    author_id: Mapped[Snowflake | None]
    channel_id: Mapped[Snowflake | None]
    message_id: Mapped[Snowflake | None]

    __table_args__ = (
        Index("ix_inbox_pending", "received_at", postgresql_where=text("handled_at IS NULL")),
        Index("ix_inbox_received_at", "received_at"),
        Index(
            "ix_inbox_dead",
            "dead_at",
            postgresql_where=text("dead_at IS NOT NULL AND handled_at IS NULL"),
        ),
        Index("ix_inbox_author", "author_id", "id", postgresql_where=text("author_id IS NOT NULL")),
        Index("ix_inbox_channel", "channel_id", postgresql_where=text("channel_id IS NOT NULL")),
        Index("ix_inbox_message", "message_id", postgresql_where=text("message_id IS NOT NULL")),
    )


class CompletedStep(Base):
    """A durable record that one step of one event's job has happened (exactly-once turns)."""

    __tablename__ = "completed_steps"

    event_id: Mapped[str] = mapped_column(Text, primary_key=True)
    step: Mapped[str] = mapped_column(Text, primary_key=True)
    result: Mapped[Json | None]
    done_at: Mapped[CreatedAt]

    __table_args__ = (
        Index("ix_completed_steps_done_at", "done_at"),
        # The per-person task quota counts a person's recent task grants.
        Index(
            "ix_completed_steps_task_grants",
            text("(result ->> 'user_id')"),
            "done_at",
            postgresql_where=text("step = 'task-grant'"),
        ),
        # "Once per person per day" notices look up that person's notices of the day.
        Index(
            "ix_completed_steps_notices",
            text("(result ->> 'user_id')"),
            "done_at",
            postgresql_where=text("step = 'notice'"),
        ),
    )
