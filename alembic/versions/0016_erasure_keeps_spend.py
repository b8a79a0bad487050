"""an erasure keeps the day's spend and the hour's tasks as numbers

`!forgetme` moves the person's usage rows to nobody and deletes their step records, which
held their task grants: the daily token budget and the hourly task quota then no longer
counted what they had spent. The register row keeps those figures instead (the JST day and
its tokens, the times of the hour's tasks: numbers, no words) until they no longer count.

Revision ID: 0016
Revises: 0015
Create Date: 2026-12-08 12:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql

from alembic import op

revision: str = "0016"
down_revision: str | None = "0015"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column(
        "erasures",
        sa.Column(
            "kept",
            postgresql.JSONB(astext_type=sa.Text()),
            server_default=sa.text("'{}'::jsonb"),
            nullable=False,
        ),
    )


def downgrade() -> None:
    op.drop_column("erasures", "kept")
