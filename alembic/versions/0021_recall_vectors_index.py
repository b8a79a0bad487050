"""each person's vectors in read order, beside their keys: recall by meaning without the heap

The meaning leg of memory recall compares a query with the person's newest 2,000 vectors of its
space (app/kit/relevance.py). Read from the table, that is a heap page per row, since a person's
memories are spread over the whole table (written over months, among everybody's): at 10⁶ rows,
most of the read's cost. This covering index holds the same rows in the order the read takes
them (person, space, newest first), with the vector and what the read filters on and ranks by
(origin, crowd figure), so the read is an index-only scan over a few hundred consecutive pages.
The crowd figures' upkeep (app/memory/store/crowds.py) compares a new vector with all of the
person's from it too, with the floor it checks (at 10⁴ memories: 10⁴ table pages before), and
so does migration 0019's trigger for a deleted or re-embedded vector.

Only vectors of at most 1024 dimensions (app/models/memory.py, VECTOR_INDEX_DIMENSIONS): a btree entry
holds at most 2,704 bytes and a halfvec takes two per dimension; a longer model's rows are read
from the table as before. The index repeats the vectors (about 1 kB per row at 384 dimensions)
and like the row it goes with a delete or an erasure, and loses the vector when the text
changes (migration 0017's trigger clears it in the row it is built from).

An index-only scan reads the table for rows on pages not yet marked all-visible, and the rows a
read wants are the newest: autovacuum visits `memories` after 2% of its rows changed or were
added (not the default 20%), so the visibility map keeps up with them.

Revision ID: 0021
Revises: 0020
Create Date: 2026-12-06 08:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa

from alembic import op

revision: str = "0021"
down_revision: str | None = "0020"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

VACUUM_SHARE = "0.02"

# Migration 0019's trigger function (a deleted or re-embedded vector puts back to wait the rows
# that counted it among their nearest), now reading the person's vectors from the index when
# it holds them: one index pass per deleted row, not a table page per memory of the person.
# (OFFSET 0 keeps the comparison out of the scan, which must read every entry anyway.)
_FUNCTION = """
CREATE OR REPLACE FUNCTION memory_crowd_neighbours_stale() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
{body}
    RETURN NULL;
END
$$
"""
_FROM_TABLE = """
    UPDATE memories SET crowd_floor = NULL
    WHERE user_id = OLD.user_id AND embedding_space = OLD.embedding_space AND id <> OLD.id
      AND crowd_floor IS NOT NULL AND 1 - (embedding <=> OLD.embedding) >= crowd_floor;
"""
_FROM_INDEX = """
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
"""
_NEIGHBOURS_GO_STALE = _FUNCTION.format(
    body=f"IF vector_dims(OLD.embedding) <= 1024 THEN {_FROM_INDEX} ELSE {_FROM_TABLE} END IF;"
)
_AS_BEFORE = _FUNCTION.format(body=_FROM_TABLE)


def upgrade() -> None:
    op.create_index(
        "ix_memories_vectors",
        "memories",
        ["user_id", "embedding_space", sa.text("updated_at DESC"), sa.text("id DESC")],
        postgresql_include=["origin", "origin_guild_id", "crowd", "crowd_floor", "embedding"],
        postgresql_where=sa.text("embedding IS NOT NULL AND vector_dims(embedding) <= 1024"),
    )
    op.execute(_NEIGHBOURS_GO_STALE)
    op.execute(
        f"ALTER TABLE memories SET (autovacuum_vacuum_scale_factor = {VACUUM_SHARE}, "
        f"autovacuum_vacuum_insert_scale_factor = {VACUUM_SHARE})"
    )


def downgrade() -> None:
    op.execute(
        "ALTER TABLE memories RESET (autovacuum_vacuum_scale_factor, "
        "autovacuum_vacuum_insert_scale_factor)"
    )
    op.execute(_AS_BEFORE)
    op.drop_index("ix_memories_vectors", table_name="memories")
