"""usage rows say how many calls' tokens are estimates

A server that reports no `usage` (an OpenAI-compatible one) is charged an estimate, about four
characters a token; `estimated_calls` counts those calls of a row's `calls`, so `GET /usage` and
`!bot usage` can say which tokens are ours. The tokens stay in `input_tokens`/`output_tokens`
and the daily caps count them like reported ones. Old rows: 0 (reported, or not known).

Revision ID: 0020
Revises: 0019
Create Date: 2026-12-06 06:15:00
"""

from collections.abc import Sequence

import sqlalchemy as sa

from alembic import op

revision: str = "0020"
down_revision: str | None = "0019"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column(
        "model_usage",
        sa.Column("estimated_calls", sa.BigInteger(), server_default="0", nullable=False),
    )


def downgrade() -> None:
    op.drop_column("model_usage", "estimated_calls")
