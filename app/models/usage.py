"""Model usage by JST day, guild, person and purpose (owned by app.usage.store alone).

One row per key, added to with every job's calls, so the table grows with the number of
people who talk to the bot each day, not with the number of calls. ``guild_id`` 0 is a DM
(or no guild at all), ``user_id`` 0 nobody in particular (a nightly diary, an episode)."""

from __future__ import annotations

from datetime import date

from sqlalchemy import BigInteger, Date, Index, Text
from sqlalchemy.orm import Mapped, mapped_column

from app.models.base import Base, CreatedAt, Snowflake


class ModelUsage(Base):
    __tablename__ = "model_usage"

    day: Mapped[date] = mapped_column(Date, primary_key=True)
    guild_id: Mapped[Snowflake] = mapped_column(primary_key=True, autoincrement=False)
    user_id: Mapped[Snowflake] = mapped_column(primary_key=True, autoincrement=False)
    purpose: Mapped[str] = mapped_column(Text, primary_key=True)
    calls: Mapped[int] = mapped_column(BigInteger, server_default="0")
    input_tokens: Mapped[int] = mapped_column(BigInteger, server_default="0")
    output_tokens: Mapped[int] = mapped_column(BigInteger, server_default="0")
    # Of ``calls``, those whose server reported no usage: their tokens are our estimate.
    estimated_calls: Mapped[int] = mapped_column(BigInteger, server_default="0")
    updated_at: Mapped[CreatedAt]

    __table_args__ = (Index("ix_model_usage_day_user_id", "day", "user_id"),)
