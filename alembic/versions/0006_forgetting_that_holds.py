"""Forgetting that holds: when the decay review last looked at a memory, and when ledger
content retention removed the text of a night's changes.

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-01 19:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa

from alembic import op

revision: str = "0006"
down_revision: str | None = "0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("memories", sa.Column("reviewed_at", sa.DateTime(timezone=True), nullable=True))
    op.add_column(
        "nightly_runs",
        sa.Column("content_redacted_at", sa.DateTime(timezone=True), nullable=True),
    )


def downgrade() -> None:
    op.drop_column("nightly_runs", "content_redacted_at")
    op.drop_column("memories", "reviewed_at")
