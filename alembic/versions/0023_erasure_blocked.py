"""the erasure guard and the register's check in one round trip

Every write about a person asks ``blocked`` first: it takes the person's guard lock, shared,
then reads the register. They were two statements, since one statement reads with the snapshot
taken when it starts, before it waited for the lock: an erasure that committed meanwhile (it
holds the lock exclusively from before its row is written until its commit) would be missed.
A VOLATILE plpgsql function takes a fresh snapshot for each statement it runs, so here the
read after the lock sees that erasure, in one call: a round trip less on each of the five to
ten guarded writes of a turn.

Revision ID: 0023
Revises: 0022
Create Date: 2026-12-06 18:50:00
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0023"
down_revision: str | None = "0022"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.execute(
        """
CREATE FUNCTION erasure_blocked(keys bigint[], people bigint[], since timestamptz)
RETURNS SETOF bigint LANGUAGE plpgsql VOLATILE AS $$
BEGIN
    PERFORM pg_advisory_xact_lock_shared(k) FROM unnest(keys) WITH ORDINALITY AS u(k, n)
    ORDER BY n;
    -- A new snapshot: an erasure that committed while we waited for its lock is seen.
    RETURN QUERY
        SELECT DISTINCT e.user_id FROM erasures AS e
        WHERE e.user_id = ANY(people)
          AND (e.status IN ('running', 'failed') OR (since IS NOT NULL AND e.started_at > since));
END
$$
"""
    )


def downgrade() -> None:
    op.execute("DROP FUNCTION erasure_blocked(bigint[], bigint[], timestamptz)")
