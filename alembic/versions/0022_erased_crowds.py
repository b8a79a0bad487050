"""a memory deleted by its owner's erasure sends none of her other memories back to wait

Migration 0019's trigger (in 0021's form) puts back to wait, for each deleted or re-embedded
vector, the owner's other rows that counted it among their nearest: a pass over her other
vectors for every such row. An erasure deletes all of a person's memories in batches, so it
made that pass over the rest of her profile for each row it deleted, for rows the same erasure
deletes next: at 10⁴ memories, 5–9 s for a batch of 500 and about 90 s in all, where an erasure
must end in seconds. A memory deleted while its owner's erasure is running (`erasures.status =
'running'`, by `ix_erasures_user`) now skips the pass: every other memory of hers goes in the
same erasure. Everyone else's rows are put back to wait as before (a memory of someone else
that names her is redacted, a change of text, not hers to skip), and so is hers on any other
delete (`!memory forget`, retention).

Revision ID: 0022
Revises: 0021
Create Date: 2026-12-06 14:40:00
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0022"
down_revision: str | None = "0021"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_FUNCTION = """
CREATE OR REPLACE FUNCTION memory_crowd_neighbours_stale() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
{guard}
    IF vector_dims(OLD.embedding) <= 1024 THEN
        UPDATE memories SET crowd_floor = NULL
        WHERE id IN (
            SELECT n.id FROM (
                SELECT id, crowd_floor, 1 - (embedding <=> OLD.embedding) AS similarity
                FROM memories
                WHERE user_id = OLD.user_id AND embedding_space = OLD.embedding_space
                  AND id <> OLD.id AND crowd_floor IS NOT NULL
                  AND embedding IS NOT NULL AND vector_dims(embedding) <= 1024
                OFFSET 0
            ) AS n
            WHERE n.similarity >= n.crowd_floor
        );
    ELSE
        UPDATE memories SET crowd_floor = NULL
        WHERE user_id = OLD.user_id AND embedding_space = OLD.embedding_space AND id <> OLD.id
          AND crowd_floor IS NOT NULL AND 1 - (embedding <=> OLD.embedding) >= crowd_floor;
    END IF;
    RETURN NULL;
END
$$
"""
_ERASED = """
    IF TG_OP = 'DELETE' AND EXISTS (
        SELECT FROM erasures WHERE user_id = OLD.user_id AND status = 'running'
    ) THEN
        RETURN NULL;  -- her erasure deletes the rest of her memories too
    END IF;
"""


def upgrade() -> None:
    op.execute(_FUNCTION.format(guard=_ERASED))


def downgrade() -> None:
    op.execute(_FUNCTION.format(guard=""))
