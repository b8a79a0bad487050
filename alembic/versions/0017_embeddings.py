"""embeddings beside the words: a vector per memory and per message, with its space

`embedding` (pgvector's half-precision `halfvec`, any length) holds the row's text as the
configured embeddings model sees it, and `embedding_space` which model made it
(app/kit/vectors.py: model, length, how queries are told apart): recall compares only vectors
of the space it queries with. Each table's owner writes them off the critical path; the worker's
back-fill gives every waiting row one (older rows, imports, rows written while the embeddings
service was down, rows of another space). A trigger clears them whenever the text changes
without them (an edit, an erasure's blanking, a rollback's restore, a hand-made UPDATE), so a
vector never outlives its text; a deleted message loses its vector with the delete (its owner).

Partial indexes find what waits: rows without a vector (only live text: never a deleted, blank
or unrecallable message) and rows of another space.

Revision ID: 0017
Revises: 0016
Create Date: 2026-12-07 10:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from pgvector.sqlalchemy import HALFVEC

from alembic import op

revision: str = "0017"
down_revision: str | None = "0016"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# Rows whose text may be embedded (what the back-fill looks for).
WAITING = {
    "memories": "embedding IS NULL",
    "messages": "embedding IS NULL AND deleted_at IS NULL AND recallable AND content <> ''",
}

_CLEAR_ON_TEXT_CHANGE = """
CREATE FUNCTION embedding_follows_content() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.content IS DISTINCT FROM OLD.content
       AND NEW.embedding IS NOT DISTINCT FROM OLD.embedding THEN
        NEW.embedding := NULL;
        NEW.embedding_space := NULL;
    END IF;
    RETURN NEW;
END
$$
"""


def upgrade() -> None:
    op.execute(_CLEAR_ON_TEXT_CHANGE)
    for table, waiting in WAITING.items():
        op.add_column(table, sa.Column("embedding", HALFVEC(), nullable=True))
        op.add_column(table, sa.Column("embedding_space", sa.Text(), nullable=True))
        op.execute(
            f"CREATE TRIGGER {table}_embedding BEFORE UPDATE OF content ON {table} "
            "FOR EACH ROW EXECUTE FUNCTION embedding_follows_content()"
        )
        op.create_index(
            f"ix_{table}_embedding_waiting", table, ["id"], postgresql_where=sa.text(waiting)
        )
        op.create_index(
            f"ix_{table}_embedding_space",
            table,
            ["embedding_space"],
            postgresql_where=sa.text("embedding IS NOT NULL"),
        )


def downgrade() -> None:
    for table in WAITING:
        op.drop_index(f"ix_{table}_embedding_space", table_name=table)
        op.drop_index(f"ix_{table}_embedding_waiting", table_name=table)
        op.execute(f"DROP TRIGGER {table}_embedding ON {table}")
        op.drop_column(table, "embedding_space")
        op.drop_column(table, "embedding")
    op.execute("DROP FUNCTION embedding_follows_content()")
