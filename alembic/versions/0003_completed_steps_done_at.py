"""completed_steps.done_at index: the lost-memory-job sweep and the seven-day prune

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-29 20:55:00
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0003"
down_revision: str | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_index("ix_completed_steps_done_at", "completed_steps", ["done_at"], unique=False)


def downgrade() -> None:
    op.drop_index("ix_completed_steps_done_at", table_name="completed_steps")
