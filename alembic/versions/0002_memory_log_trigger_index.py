"""memory_log (user_id, trigger) index for the write path's idempotency check

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-29 20:05:00
"""

from collections.abc import Sequence

import sqlalchemy as sa

from alembic import op

revision: str = "0002"
down_revision: str | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_index(
        "ix_memory_log_user_trigger",
        "memory_log",
        ["user_id", "trigger"],
        unique=False,
        postgresql_where=sa.text("trigger IS NOT NULL"),
    )


def downgrade() -> None:
    op.drop_index(
        "ix_memory_log_user_trigger",
        table_name="memory_log",
        postgresql_where=sa.text("trigger IS NOT NULL"),
    )
