"""Consent to be remembered: who paused learning (owned by app.consent.store alone)."""

from __future__ import annotations

from sqlalchemy.orm import Mapped, mapped_column

from app.models.base import Base, CreatedAt, Snowflake


class MemoryConsent(Base):
    """People who paused learning (`!memory pause`, or left paused by `!forgetme`)."""

    __tablename__ = "memory_consent"

    user_id: Mapped[Snowflake] = mapped_column(primary_key=True, autoincrement=False)
    paused_at: Mapped[CreatedAt]
