"""completed_steps keyed by (event_id, step) instead of a 'turn:<event>:<step>' string

Readers (the lost-memory-job sweep) no longer parse key strings. The reply step's result
gains the channel and speaker the memory job needs, backfilled from the channel log.

Revision ID: 0004
Revises: 0003
Create Date: 2026-12-01 13:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa

from alembic import op

revision: str = "0004"
down_revision: str | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("completed_steps", sa.Column("event_id", sa.Text(), nullable=True))
    op.add_column("completed_steps", sa.Column("step", sa.Text(), nullable=True))
    op.execute(
        r"""
        UPDATE completed_steps
        SET event_id = regexp_replace(key, '^turn:(.*):([^:]+)$', '\1'),
            step = regexp_replace(key, '^turn:(.*):([^:]+)$', '\2')
        """
    )
    op.execute(
        r"""
        UPDATE completed_steps AS s
        SET result = coalesce(s.result, '{}'::jsonb) || jsonb_build_object(
            'channel_id', m.channel_id::text, 'speaker_id', m.author_id::text)
        FROM messages AS m
        WHERE s.step = 'reply' AND s.event_id ~ '^[0-9]{1,19}$' AND m.id = s.event_id::bigint
        """
    )
    op.drop_constraint("pk_completed_steps", "completed_steps", type_="primary")
    op.drop_column("completed_steps", "key")
    op.alter_column("completed_steps", "event_id", nullable=False)
    op.alter_column("completed_steps", "step", nullable=False)
    op.create_primary_key("pk_completed_steps", "completed_steps", ["event_id", "step"])


def downgrade() -> None:
    op.add_column("completed_steps", sa.Column("key", sa.Text(), nullable=True))
    op.execute("UPDATE completed_steps SET key = 'turn:' || event_id || ':' || step")
    op.drop_constraint("pk_completed_steps", "completed_steps", type_="primary")
    op.drop_column("completed_steps", "step")
    op.drop_column("completed_steps", "event_id")
    op.alter_column("completed_steps", "key", nullable=False)
    op.create_primary_key("pk_completed_steps", "completed_steps", ["key"])
