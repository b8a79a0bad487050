"""model usage by JST day, guild, person and purpose

Every model and decision call adds to one row per (day, guild, person, purpose), upserted,
so the table stays small: `!bot usage`, `GET /usage` and the daily token caps
(`DAILY_TOKENS_PER_USER`, `DAILY_TOKENS_PER_GUILD`) read it. `guild_id` 0 is a DM (or no
guild), `user_id` 0 nobody in particular.

Revision ID: 0013
Revises: 0012
Create Date: 2026-12-04 10:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa

from alembic import op

revision: str = "0013"
down_revision: str | None = "0012"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "model_usage",
        sa.Column("day", sa.Date(), nullable=False),
        sa.Column("guild_id", sa.BigInteger(), autoincrement=False, nullable=False),
        sa.Column("user_id", sa.BigInteger(), autoincrement=False, nullable=False),
        sa.Column("purpose", sa.Text(), nullable=False),
        sa.Column("calls", sa.BigInteger(), server_default="0", nullable=False),
        sa.Column("input_tokens", sa.BigInteger(), server_default="0", nullable=False),
        sa.Column("output_tokens", sa.BigInteger(), server_default="0", nullable=False),
        sa.Column(
            "updated_at", sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False
        ),
        sa.PrimaryKeyConstraint("day", "guild_id", "user_id", "purpose", name="pk_model_usage"),
    )
    op.create_index("ix_model_usage_day_user_id", "model_usage", ["day", "user_id"])


def downgrade() -> None:
    op.drop_index("ix_model_usage_day_user_id", table_name="model_usage")
    op.drop_table("model_usage")
