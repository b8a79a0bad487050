"""the pgvector extension, required from this release

Embeddings (recall and the duplicate check by meaning) live beside their rows as pgvector
columns, so the server must offer the `vector` extension. Without it this revision stops with a
message naming what to install; Alembic runs every pending revision in one transaction on
Postgres, so a server that lacks it is left exactly as it was.

Revision ID: 0014
Revises: 0013
Create Date: 2026-12-06 10:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa

from alembic import op

revision: str = "0014"
down_revision: str | None = "0013"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

MISSING = (
    "This PostgreSQL server does not offer the pgvector extension ('vector'), which this "
    "release requires. Install it on the database server (Debian/Ubuntu: the "
    "postgresql-<version>-pgvector package; the pgvector/pgvector Docker image; on a managed "
    "service, allow the 'vector' extension), then run the migration again. Nothing was changed."
)


class PgvectorMissing(RuntimeError):
    """The server has no `vector` extension to create."""


def upgrade() -> None:
    bind = op.get_bind()
    available = bind.execute(
        sa.text("SELECT 1 FROM pg_available_extensions WHERE name = 'vector'")
    ).scalar()
    if available is None:
        raise PgvectorMissing(MISSING)
    op.execute("CREATE EXTENSION IF NOT EXISTS vector")


def downgrade() -> None:
    op.execute("DROP EXTENSION IF EXISTS vector")
