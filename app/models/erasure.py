"""Erasures (`!forgetme`, the admin erase): one row per request, its progress and receipt
(owned by app.privacy.store alone)."""

from __future__ import annotations

from sqlalchemy import BigInteger, CheckConstraint, Identity, Index, Text, text
from sqlalchemy.orm import Mapped, mapped_column

from app.models.base import Base, CreatedAt, Json, Snowflake, Timestamp

STATUSES = ("running", "done", "failed")


class Erasure(Base):
    """While running (and once done, for whatever started before it) nothing is written
    about the person; the job works through ``progress`` in committed batches."""

    __tablename__ = "erasures"

    id: Mapped[int] = mapped_column(BigInteger, Identity(always=False), primary_key=True)
    user_id: Mapped[Snowflake]
    status: Mapped[str] = mapped_column(Text, server_default=text("'running'"))
    requested_by: Mapped[str] = mapped_column(Text)  # "forgetme" or "admin"
    # The `!forgetme` event: a retried command joins its erasure instead of starting another.
    command_event_id: Mapped[str | None] = mapped_column(Text, unique=True)
    channel_id: Mapped[Snowflake | None]  # where `!forgetme` was said (the closed-DM notice)
    progress: Mapped[Json] = mapped_column(server_default=text("'{}'::jsonb"), nullable=False)
    receipt: Mapped[Json | None]
    # What the budgets still count after the person's usage and step records are gone: the
    # JST day's tokens ({"day", "tokens"}) and the last hour's task grants ({"task_grants"}:
    # their times). Numbers only; dropped once they no longer count.
    kept: Mapped[Json] = mapped_column(server_default=text("'{}'::jsonb"), nullable=False)
    error: Mapped[str | None] = mapped_column(Text)  # the last failure's exception type only
    started_at: Mapped[CreatedAt]
    finished_at: Mapped[Timestamp | None]

    __table_args__ = (
        CheckConstraint("status IN ('running', 'done', 'failed')", name="status"),
        Index("ix_erasures_user", "user_id"),
        # One erasure at a time per person: a second request joins the running one.
        Index(
            "uq_erasures_running",
            "user_id",
            unique=True,
            postgresql_where=text("status = 'running'"),
        ),
    )
