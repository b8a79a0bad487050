"""the channel directory (threads' parents, channel mode and persona); attachments by name

`channels` records where a thread hangs (THREAD_CREATE/UPDATE, or GET /channels/{id} for a
thread first seen by a message) and the operators' settings for a channel: its mode
(mention, free, off) and its persona addition, null where not set. `messages.attachments`
names what a message carried (filename, type, size), never its content. An index finds a
person's notices of the day (DMS_ENABLED=false answers DM conversation once a day).

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-03 10:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql

from alembic import op

revision: str = "0009"
down_revision: str | None = "0008"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "channels",
        sa.Column("id", sa.BigInteger(), autoincrement=False, nullable=False),
        sa.Column("guild_id", sa.BigInteger(), nullable=True),
        sa.Column("parent_id", sa.BigInteger(), nullable=True),
        sa.Column("name", sa.Text(), nullable=True),
        sa.Column("type", sa.Integer(), nullable=True),
        sa.Column("mode", sa.Text(), nullable=True),
        sa.Column("persona", sa.Text(), nullable=True),
        sa.Column("settings_by", sa.BigInteger(), nullable=True),
        sa.Column("settings_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column(
            "updated_at", sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False
        ),
        sa.CheckConstraint("mode IN ('mention', 'free', 'off')", name="ck_channels_mode"),
        sa.CheckConstraint("char_length(persona) <= 500", name="ck_channels_persona_length"),
        sa.PrimaryKeyConstraint("id", name="pk_channels"),
    )
    op.create_index("ix_channels_parent_id", "channels", ["parent_id"], unique=False)
    op.add_column(
        "messages",
        sa.Column(
            "attachments",
            postgresql.JSONB(astext_type=sa.Text()),
            server_default=sa.text("'[]'::jsonb"),
            nullable=False,
        ),
    )
    op.create_index(
        "ix_completed_steps_notices",
        "completed_steps",
        [sa.text("(result ->> 'user_id')"), "done_at"],
        unique=False,
        postgresql_where=sa.text("step = 'notice'"),
    )


def downgrade() -> None:
    op.drop_index("ix_completed_steps_notices", table_name="completed_steps")
    op.drop_column("messages", "attachments")
    op.drop_index("ix_channels_parent_id", table_name="channels")
    op.drop_table("channels")
