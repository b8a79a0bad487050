"""relevance recall: search tokens on memories and messages, kept with their text

`search_tokens` holds each row's tokens as the application's tokenizer makes them
(app/kit/tokens.py: words, and CJK bigrams and characters), written by the table's owner
with every insert and text change and back-filled here in batches with the same tokenizer.
A trigger clears them whenever the text changes without them (an erasure's rewrite, a
hand-made UPDATE), so tokens never outlive their text; the owner fills cleared ones in
before its next ranked read. GIN indexes over `search_keys(scope, tokens)` (each token
scoped by its person or channel) serve the ranked reads' probes. `messages.recallable` is false for a message its author wrote while learning about
them was paused (and for the bot's reply to it): older-conversation recall never brings
those back.

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-03 10:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql

from alembic import context, op
from app.kit.relevance import fill_payload, fill_statement

revision: str = "0010"
down_revision: str | None = "0009"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

BATCH = 5000
TABLES = (("memories", "user_id"), ("messages", "channel_id"))

# The GIN indexes' keys: each token scoped by its person or channel ("<id> <token>"), so a
# probe for a word reads only that scope's rows with it, however common it is elsewhere.
_SEARCH_KEYS = """
CREATE FUNCTION search_keys(scope bigint, tokens text[]) RETURNS text[]
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$ SELECT ARRAY(SELECT DISTINCT scope::text || ' ' || t FROM unnest(tokens) AS t) $$
"""

_CLEAR_ON_TEXT_CHANGE = """
CREATE FUNCTION search_tokens_follow_content() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.content IS DISTINCT FROM OLD.content
       AND NEW.search_tokens IS NOT DISTINCT FROM OLD.search_tokens THEN
        NEW.search_tokens := NULL;
    END IF;
    RETURN NEW;
END
$$
"""


def backfill(connection: sa.Connection, table: str, batch: int = BATCH) -> int:
    """Every row's tokens, in id order, ``batch`` rows per statement; how many rows."""
    select = sa.text(
        f"SELECT id, content FROM {table} WHERE id > :after AND search_tokens IS NULL "
        "ORDER BY id LIMIT :batch"
    )
    update = fill_statement(table)
    after, done = -(2**63), 0
    while rows := connection.execute(select, {"after": after, "batch": batch}).all():
        connection.execute(update, {"rows": fill_payload([(r.id, r.content) for r in rows])})
        after, done = rows[-1].id, done + len(rows)
    return done


def upgrade() -> None:
    for table, _ in TABLES:
        op.add_column(table, sa.Column("search_tokens", postgresql.ARRAY(sa.Text()), nullable=True))
    op.add_column(
        "messages",
        sa.Column("recallable", sa.Boolean(), server_default=sa.text("true"), nullable=False),
    )
    if not context.is_offline_mode():  # offline, the owners fill them in on first read
        for table, _ in TABLES:
            backfill(op.get_bind(), table)
    op.execute(_CLEAR_ON_TEXT_CHANGE)
    op.execute(_SEARCH_KEYS)
    for table, scope in TABLES:
        op.execute(
            f"CREATE TRIGGER {table}_search_tokens BEFORE UPDATE OF content ON {table} "
            "FOR EACH ROW EXECUTE FUNCTION search_tokens_follow_content()"
        )
        op.create_index(
            f"ix_{table}_search",
            table,
            [sa.text(f"search_keys({scope}, search_tokens)")],
            postgresql_using="gin",
            # No pending list: every read would scan up to 4 MB of unmerged entries.
            postgresql_with={"fastupdate": "off"},
        )
        op.create_index(
            f"ix_{table}_tokens_missing",
            table,
            [scope],
            postgresql_where=sa.text("search_tokens IS NULL"),
        )


def downgrade() -> None:
    for table, _ in TABLES:
        op.drop_index(f"ix_{table}_tokens_missing", table_name=table)
        op.drop_index(f"ix_{table}_search", table_name=table)
        op.execute(f"DROP TRIGGER {table}_search_tokens ON {table}")
        op.drop_column(table, "search_tokens")
    op.execute("DROP FUNCTION search_tokens_follow_content()")
    op.execute("DROP FUNCTION search_keys(bigint, text[])")
    op.drop_column("messages", "recallable")
