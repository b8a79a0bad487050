"""bounded exports: a person's ledger changes indexed apart from their reads, and reads
folded into monthly counts (LEDGER_READ_ROLLUP_DAYS, off by default)

`ix_memory_log_user_changes` serves an export's keyset pages over a person's changes without
walking their reads. `ix_memory_log_rollup` holds the reads the rollup may take (every read
but a reply prompt's that found memories, which an erasure follows to the reply), oldest
first. `memory_read_counts` keeps how many read rows each actor wrote per person and month
once the rows are removed.

Revision ID: 0012
Revises: 0011
Create Date: 2026-12-04 10:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa

from alembic import op

revision: str = "0012"
down_revision: str | None = "0011"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

CHANGES = "action <> 'read'"
FED_A_REPLY = "actor = 'reply' AND trigger IS NOT NULL AND coalesce(after, '[]') <> '[]'"
ROLLUP_CANDIDATES = f"action = 'read' AND NOT ({FED_A_REPLY})"


def upgrade() -> None:
    op.create_index(
        "ix_memory_log_user_changes",
        "memory_log",
        ["user_id", "id"],
        unique=False,
        postgresql_where=sa.text(CHANGES),
    )
    op.create_index(
        "ix_memory_log_rollup",
        "memory_log",
        ["id"],
        unique=False,
        postgresql_where=sa.text(ROLLUP_CANDIDATES),
    )
    op.create_table(
        "memory_read_counts",
        sa.Column("user_id", sa.BigInteger(), nullable=False),
        sa.Column("actor", sa.Text(), nullable=False),
        sa.Column("month", sa.Date(), nullable=False),
        sa.Column("reads", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("user_id", "actor", "month", name=op.f("pk_memory_read_counts")),
    )


def downgrade() -> None:
    # The counted reads cannot become rows again: a downgrade loses only their counts.
    op.drop_table("memory_read_counts")
    op.drop_index("ix_memory_log_rollup", table_name="memory_log")
    op.drop_index("ix_memory_log_user_changes", table_name="memory_log")
