"""inbox retries with backoff and dead letters; an index for the per-person task quota

An event whose job fails is retried at `next_attempt_at` (backing off by attempt) and, once
its attempts are spent, dead-lettered (`dead_at`) instead of marked handled. `last_error`
holds the last failure's exception type. Events the previous rule gave up (marked handled
after a sixth claim that never ran) become dead letters, so an operator can see and replay
them.

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-02 10:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa

from alembic import op

revision: str = "0007"
down_revision: str | None = "0006"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("inbox", sa.Column("next_attempt_at", sa.DateTime(timezone=True), nullable=True))
    op.add_column("inbox", sa.Column("last_error", sa.Text(), nullable=True))
    op.add_column("inbox", sa.Column("dead_at", sa.DateTime(timezone=True), nullable=True))
    op.create_index(
        "ix_inbox_dead",
        "inbox",
        ["dead_at"],
        unique=False,
        postgresql_where=sa.text("dead_at IS NOT NULL AND handled_at IS NULL"),
    )
    # The old rule: the claim that counted a sixth attempt marked the event handled unrun.
    op.execute(
        """
        UPDATE inbox SET dead_at = handled_at, handled_at = NULL, attempts = 5,
                         last_error = 'GivenUpBeforeRetries'
        WHERE handled_at IS NOT NULL AND attempts > 5
        """
    )
    op.create_index(
        "ix_completed_steps_task_grants",
        "completed_steps",
        [sa.text("(result ->> 'user_id')"), "done_at"],
        unique=False,
        postgresql_where=sa.text("step = 'task-grant'"),
    )


def downgrade() -> None:
    op.drop_index("ix_completed_steps_task_grants", table_name="completed_steps")
    # The previous code knows no dead letters: they become handled, as it would have left them.
    op.execute("UPDATE inbox SET handled_at = dead_at WHERE dead_at IS NOT NULL")
    op.drop_index("ix_inbox_dead", table_name="inbox")
    op.drop_column("inbox", "dead_at")
    op.drop_column("inbox", "last_error")
    op.drop_column("inbox", "next_attempt_at")
