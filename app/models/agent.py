"""Task-agent sessions: one bounded tool-use history per channel."""

from __future__ import annotations

from sqlalchemy import func
from sqlalchemy.orm import Mapped, mapped_column

from app.models.base import Base, CreatedAt, Json, Snowflake, Timestamp


class AgentSession(Base):
    __tablename__ = "agent_sessions"

    channel_id: Mapped[Snowflake] = mapped_column(primary_key=True, autoincrement=False)
    history: Mapped[Json] = mapped_column(nullable=False)
    created_at: Mapped[CreatedAt]
    updated_at: Mapped[Timestamp] = mapped_column(server_default=func.now(), nullable=False)
