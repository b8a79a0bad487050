"""Task-agent sessions: one bounded tool-use history per channel."""

from __future__ import annotations

from sqlalchemy import BigInteger, Index, func, text
from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.orm import Mapped, mapped_column

from app.models.base import Base, CreatedAt, Json, Snowflake, Timestamp


class AgentSession(Base):
    __tablename__ = "agent_sessions"

    channel_id: Mapped[Snowflake] = mapped_column(primary_key=True, autoincrement=False)
    history: Mapped[Json] = mapped_column(nullable=False)
    # Everyone whose words are in the stored turns (each turn also lists its own authors).
    author_ids: Mapped[list[int]] = mapped_column(
        ARRAY(BigInteger), server_default=text("'{}'::bigint[]")
    )
    created_at: Mapped[CreatedAt]
    updated_at: Mapped[Timestamp] = mapped_column(server_default=func.now(), nullable=False)

    __table_args__ = (Index("ix_agent_sessions_authors", "author_ids", postgresql_using="gin"),)
