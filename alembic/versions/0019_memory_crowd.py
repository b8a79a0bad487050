"""each memory's crowd figure, kept beside its vector

The meaning leg of memory recall discounts a memory that is one of a crowd of look-alikes
(app/kit/relevance.py, CSLS): it loses its mean similarity to its nearest neighbours among
the same person's memories of the same space. Computed at read time that was 10⁴ similarities
per read; now each row keeps it: `crowd` (the mean similarity to its CROWD_K nearest) and
`crowd_floor` (the least of those, so a new vector knows which rows it enters the nearest of;
-2 when the person has fewer than CROWD_K others). Derived from the person's words like the
vector, it goes with the row.

A row whose vector changes (a new text, a changed model) loses both figures to a trigger, so a
figure never outlives the vector it was computed from; rows that had a deleted or changed
vector among their nearest lose their floor (their figure stays, a little high, until the
back-fill computes it again). NULL `crowd_floor` beside a vector: the back-fill's work, which
the partial index finds.

Revision ID: 0019
Revises: 0018
Create Date: 2026-12-08 06:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa

from alembic import op

revision: str = "0019"
down_revision: str | None = "0018"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_CROWD_FOLLOWS_VECTOR = """
CREATE FUNCTION memory_crowd_follows_embedding() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF (NEW.embedding IS DISTINCT FROM OLD.embedding
        OR NEW.embedding_space IS DISTINCT FROM OLD.embedding_space)
       AND NEW.crowd IS NOT DISTINCT FROM OLD.crowd THEN
        NEW.crowd := NULL;
        NEW.crowd_floor := NULL;
    END IF;
    RETURN NEW;
END
$$
"""

# The rows that counted the old vector among their nearest: their floor is gone (refreshed by
# the back-fill). Fired once per deleted or re-embedded row with a vector.
_NEIGHBOURS_GO_STALE = """
CREATE FUNCTION memory_crowd_neighbours_stale() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE memories SET crowd_floor = NULL
    WHERE user_id = OLD.user_id AND embedding_space = OLD.embedding_space AND id <> OLD.id
      AND crowd_floor IS NOT NULL
      AND 1 - (embedding <=> OLD.embedding) >= crowd_floor;
    RETURN NULL;
END
$$
"""


def upgrade() -> None:
    op.add_column("memories", sa.Column("crowd", sa.Double(), nullable=True))
    op.add_column("memories", sa.Column("crowd_floor", sa.Double(), nullable=True))
    op.execute(_CROWD_FOLLOWS_VECTOR)
    op.execute(_NEIGHBOURS_GO_STALE)
    # After memories_embedding (triggers fire in name order): sees the vector it cleared.
    op.execute(
        "CREATE TRIGGER memories_embedding_crowd BEFORE UPDATE ON memories "
        "FOR EACH ROW EXECUTE FUNCTION memory_crowd_follows_embedding()"
    )
    op.execute(
        "CREATE TRIGGER memories_crowd_deleted AFTER DELETE ON memories FOR EACH ROW "
        "WHEN (OLD.embedding IS NOT NULL) EXECUTE FUNCTION memory_crowd_neighbours_stale()"
    )
    op.execute(
        "CREATE TRIGGER memories_crowd_reembedded AFTER UPDATE ON memories FOR EACH ROW "
        "WHEN (OLD.embedding IS NOT NULL AND (OLD.embedding IS DISTINCT FROM NEW.embedding "
        "OR OLD.embedding_space IS DISTINCT FROM NEW.embedding_space)) "
        "EXECUTE FUNCTION memory_crowd_neighbours_stale()"
    )
    op.create_index(
        "ix_memories_crowd_waiting",
        "memories",
        ["user_id"],
        postgresql_where=sa.text("embedding IS NOT NULL AND crowd_floor IS NULL"),
    )


def downgrade() -> None:
    op.drop_index("ix_memories_crowd_waiting", table_name="memories")
    op.execute("DROP TRIGGER memories_crowd_reembedded ON memories")
    op.execute("DROP TRIGGER memories_crowd_deleted ON memories")
    op.execute("DROP TRIGGER memories_embedding_crowd ON memories")
    op.execute("DROP FUNCTION memory_crowd_neighbours_stale()")
    op.execute("DROP FUNCTION memory_crowd_follows_embedding()")
    op.drop_column("memories", "crowd_floor")
    op.drop_column("memories", "crowd")
