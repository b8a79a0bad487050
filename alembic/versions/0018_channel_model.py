"""a channel's chat model

Staff choose a channel's chat model from CHAT_MODELS (`!bot channel model`, the slash command,
the channel settings API); null: CHAT_MODEL. A thread follows its parent unless set itself.

Revision ID: 0018
Revises: 0017
Create Date: 2026-12-06 05:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa

from alembic import op

revision: str = "0018"
down_revision: str | None = "0017"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("channels", sa.Column("model", sa.Text(), nullable=True))


def downgrade() -> None:
    op.drop_column("channels", "model")
