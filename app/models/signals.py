"""Feedback on the bot's messages (reactions, corrections) for the nightly style revision."""

from __future__ import annotations

from sqlalchemy import BigInteger, CheckConstraint, Identity, Index, Text, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from app.models.base import Base, CreatedAt, Snowflake


class Signal(Base):
    __tablename__ = "signals"

    id: Mapped[int] = mapped_column(BigInteger, Identity(always=False), primary_key=True)
    message_id: Mapped[Snowflake]
    user_id: Mapped[Snowflake]
    kind: Mapped[str] = mapped_column(Text)
    value: Mapped[str] = mapped_column(Text)
    created_at: Mapped[CreatedAt]

    __table_args__ = (
        UniqueConstraint("message_id", "user_id", "kind", "value"),
        CheckConstraint("kind IN ('reaction', 'correction')", name="kind"),
        Index("ix_signals_created_at", "created_at"),
        Index("ix_signals_user_id", "user_id", "id"),
    )
