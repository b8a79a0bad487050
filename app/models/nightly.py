"""Nightly runs and the persona style overrides they produce."""

from __future__ import annotations

from datetime import date

from sqlalchemy import BigInteger, Date, ForeignKey, Identity, Index, Text, text
from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.orm import Mapped, mapped_column

from app.models.base import Base, CreatedAt, Json, Snowflake, Timestamp


class NightlyRun(Base):
    __tablename__ = "nightly_runs"

    id: Mapped[int] = mapped_column(BigInteger, Identity(always=False), primary_key=True)
    day: Mapped[date] = mapped_column(Date)
    status: Mapped[str] = mapped_column(Text, server_default=text("'running'"))
    window_start: Mapped[Timestamp | None]
    window_end: Mapped[Timestamp | None]
    diary: Mapped[str | None] = mapped_column(Text)
    # Provenance: the authors of the messages the diary was written from (NULL: before it
    # was recorded).
    diary_user_ids: Mapped[list[int] | None] = mapped_column(ARRAY(BigInteger))
    summary: Mapped[Json] = mapped_column(server_default=text("'{}'::jsonb"), nullable=False)
    started_at: Mapped[CreatedAt]
    finished_at: Mapped[Timestamp | None]
    rolled_back_at: Mapped[Timestamp | None]
    # When ledger content retention removed the text of its changes: it cannot be undone.
    content_redacted_at: Mapped[Timestamp | None]

    __table_args__ = (
        # One live run per JST day, however many workers race for it.
        Index(
            "uq_nightly_runs_day_live",
            "day",
            unique=True,
            postgresql_where=text("rolled_back_at IS NULL"),
        ),
    )


class StyleOverride(Base):
    """The persona's style section as revised by a night for one guild; the guild's newest
    unreverted one is active there."""

    __tablename__ = "style_overrides"

    id: Mapped[int] = mapped_column(BigInteger, Identity(always=False), primary_key=True)
    # The guild whose feedback made it and whose replies use it. NULL: a deployment-wide
    # revision from before styles were per guild, kept for the record and applied nowhere.
    guild_id: Mapped[Snowflake | None]
    content: Mapped[str] = mapped_column(Text)
    # Provenance: whose feedback (and whose conversations the rated bot messages answered)
    # the revision was made from; NULL: before it was recorded.
    source_user_ids: Mapped[list[int] | None] = mapped_column(ARRAY(BigInteger))
    run_id: Mapped[int | None] = mapped_column(
        BigInteger, ForeignKey("nightly_runs.id", ondelete="SET NULL")
    )
    created_at: Mapped[CreatedAt]
    reverted_at: Mapped[Timestamp | None]

    __table_args__ = (
        Index("ix_style_overrides_run", "run_id"),
        Index(
            "ix_style_overrides_guild_active",
            "guild_id",
            "created_at",
            postgresql_where=text("reverted_at IS NULL"),
        ),
    )
