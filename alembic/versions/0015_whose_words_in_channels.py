"""who wrote a channel's persona and a thread's name; thread frames filed under their owner

An erasure clears the persona its author wrote (not whoever last changed the channel's mode)
and blanks the thread names the person gave, in `channels` and in the recorded frames. The
persona's author is back-filled from `settings_by` (the last to set the channel's settings, the
only record there was); a thread's namer and its frames' author from the recorded frames'
`owner_id` (Discord's thread creator), where they are still kept.

Revision ID: 0015
Revises: 0014
Create Date: 2026-12-08 10:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa

from alembic import op

revision: str = "0015"
down_revision: str | None = "0014"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

THREAD_FRAMES = "('THREAD_CREATE', 'THREAD_UPDATE')"


def upgrade() -> None:
    op.add_column("channels", sa.Column("persona_by", sa.BigInteger(), nullable=True))
    op.add_column("channels", sa.Column("name_by", sa.BigInteger(), nullable=True))
    op.execute("UPDATE channels SET persona_by = settings_by WHERE persona IS NOT NULL")
    op.execute(
        f"""
        UPDATE inbox SET author_id = (payload #>> '{{d,owner_id}}')::bigint
        WHERE event_type IN {THREAD_FRAMES} AND author_id IS NULL
          AND payload #>> '{{d,owner_id}}' ~ '^[0-9]{{1,19}}$'
        """
    )
    op.execute(
        f"""
        UPDATE channels AS c SET name_by = i.author_id
        FROM (
            SELECT DISTINCT ON (channel_id) channel_id, author_id FROM inbox
            WHERE event_type IN {THREAD_FRAMES} AND author_id IS NOT NULL
            ORDER BY channel_id, received_at DESC
        ) AS i
        WHERE i.channel_id = c.id AND c.name IS NOT NULL
        """
    )
    op.create_index("ix_channels_persona_by", "channels", ["persona_by"])
    op.create_index("ix_channels_name_by", "channels", ["name_by"])


def downgrade() -> None:
    op.drop_index("ix_channels_name_by", table_name="channels")
    op.drop_index("ix_channels_persona_by", table_name="channels")
    op.drop_column("channels", "name_by")
    op.drop_column("channels", "persona_by")
