"""guild scope: a channel pin's guild, and a style revision per guild

`pins.guild_id` is the guild of a channel pin's channel, so only that guild's staff remove
it; existing channel pins take it from the channel directory, else from the channel log
(NULL when neither knows the channel: then only an operator removes the pin). Global pins
keep NULL.

`style_overrides.guild_id` is the guild whose members' feedback made the revision and the
only guild whose replies use it. Existing revisions keep NULL: they were made from every
guild's and every DM's feedback at once, so they are kept for the record (a run's rollback,
the admin API, erasure) but applied nowhere; each guild starts again from the persona file's
style section (docs/operations.md, "Style per guild").

Revision ID: 0011
Revises: 0010
Create Date: 2026-12-05 10:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa

from alembic import op

revision: str = "0011"
down_revision: str | None = "0010"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_PIN_GUILD_FROM_DIRECTORY = """
UPDATE pins SET guild_id = channels.guild_id
FROM channels
WHERE pins.scope = 'channel' AND pins.guild_id IS NULL AND channels.id = pins.channel_id
"""

_PIN_GUILD_FROM_LOG = """
UPDATE pins SET guild_id = (
    SELECT messages.guild_id FROM messages
    WHERE messages.channel_id = pins.channel_id AND messages.guild_id IS NOT NULL
    LIMIT 1
)
WHERE pins.scope = 'channel' AND pins.guild_id IS NULL
"""


def upgrade() -> None:
    op.add_column("pins", sa.Column("guild_id", sa.BigInteger(), nullable=True))
    op.execute(_PIN_GUILD_FROM_DIRECTORY)
    op.execute(_PIN_GUILD_FROM_LOG)
    op.add_column("style_overrides", sa.Column("guild_id", sa.BigInteger(), nullable=True))
    op.create_index(
        "ix_style_overrides_guild_active",
        "style_overrides",
        ["guild_id", "created_at"],
        unique=False,
        postgresql_where=sa.text("reverted_at IS NULL"),
    )


def downgrade() -> None:
    op.drop_index("ix_style_overrides_guild_active", table_name="style_overrides")
    op.drop_column("style_overrides", "guild_id")
    op.drop_column("pins", "guild_id")
