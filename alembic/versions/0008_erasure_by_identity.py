"""erasure by identity and provenance: the erasures register, early deletes and edits
(tombstones), who and what each recorded frame is about, mentions in the log, and the
inputs of every derived artifact

`erasures` holds one row per request (its progress, so a killed job resumes, and its
receipt). `message_tombstones` keeps a delete or edit that arrived before its message.
`inbox.author_id/channel_id/message_id` and `messages.mention_ids` let an erasure find a
person's frames and the texts that mention them by id. Episodes, diaries, style revisions
and task sessions record whose words they were made from (NULL or no per-turn authors:
made before this revision; the erasure applies a conservative rule to those). Back-fills
derive the new columns from what is already stored.

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-02 12:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql

from alembic import op

revision: str = "0008"
down_revision: str | None = "0007"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_IDS = postgresql.ARRAY(sa.BigInteger())
_SNOWFLAKE = r"'^\d{1,19}$'"


def _snowflake(path: str) -> str:
    return f"CASE WHEN payload #>> '{path}' ~ {_SNOWFLAKE} THEN (payload #>> '{path}')::bigint END"


def upgrade() -> None:
    op.create_table(
        "erasures",
        sa.Column("id", sa.BigInteger(), sa.Identity(always=False), nullable=False),
        sa.Column("user_id", sa.BigInteger(), nullable=False),
        sa.Column("status", sa.Text(), server_default=sa.text("'running'"), nullable=False),
        sa.Column("requested_by", sa.Text(), nullable=False),
        sa.Column("command_event_id", sa.Text(), nullable=True),
        sa.Column("channel_id", sa.BigInteger(), nullable=True),
        sa.Column(
            "progress",
            postgresql.JSONB(astext_type=sa.Text()),
            server_default=sa.text("'{}'::jsonb"),
            nullable=False,
        ),
        sa.Column("receipt", postgresql.JSONB(astext_type=sa.Text()), nullable=True),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column(
            "started_at", sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False
        ),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
        sa.CheckConstraint("status IN ('running', 'done', 'failed')", name="ck_erasures_status"),
        sa.PrimaryKeyConstraint("id", name="pk_erasures"),
        sa.UniqueConstraint("command_event_id", name="uq_erasures_command_event_id"),
    )
    op.create_index("ix_erasures_user", "erasures", ["user_id"])
    op.create_index(
        "uq_erasures_running",
        "erasures",
        ["user_id"],
        unique=True,
        postgresql_where=sa.text("status = 'running'"),
    )

    op.create_table(
        "message_tombstones",
        sa.Column("message_id", sa.BigInteger(), autoincrement=False, nullable=False),
        sa.Column("channel_id", sa.BigInteger(), nullable=False),
        sa.Column("author_id", sa.BigInteger(), nullable=True),
        sa.Column("content", sa.Text(), nullable=True),
        sa.Column("edited_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("deleted_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column(
            "received_at", sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False
        ),
        sa.PrimaryKeyConstraint("message_id", name="pk_message_tombstones"),
    )
    op.create_index("ix_message_tombstones_received", "message_tombstones", ["received_at"])
    op.create_index(
        "ix_message_tombstones_author",
        "message_tombstones",
        ["author_id"],
        postgresql_where=sa.text("author_id IS NOT NULL"),
    )

    # The channel log: mentions by id, replies, names, a person's messages in id order.
    op.add_column(
        "messages",
        sa.Column("mention_ids", _IDS, server_default=sa.text("'{}'::bigint[]"), nullable=False),
    )
    op.execute(
        r"""
        UPDATE messages SET mention_ids = ARRAY(
            SELECT DISTINCT m[1]::bigint FROM regexp_matches(content, '<@!?(\d{1,19})>', 'g') AS m
        )
        WHERE content ~ '<@!?\d'
        """
    )
    op.drop_index("ix_messages_author_id", table_name="messages")
    op.create_index("ix_messages_author_id", "messages", ["author_id", "id"])
    op.create_index(
        "ix_messages_reply_to",
        "messages",
        ["reply_to_id"],
        postgresql_where=sa.text("reply_to_id IS NOT NULL"),
    )
    op.create_index("ix_messages_mentions", "messages", ["mention_ids"], postgresql_using="gin")
    op.create_index("ix_messages_author_name", "messages", [sa.text("lower(author_name)")])

    # Recorded frames: who and what each is about.
    for column in ("author_id", "channel_id", "message_id"):
        op.add_column("inbox", sa.Column(column, sa.BigInteger(), nullable=True))
    op.execute(
        f"""
        UPDATE inbox SET
            author_id = coalesce({_snowflake("{d,author,id}")}, {_snowflake("{d,user_id}")}),
            channel_id = {_snowflake("{d,channel_id}")},
            message_id = coalesce(
                CASE WHEN event_type IN ('MESSAGE_CREATE', 'MESSAGE_UPDATE', 'MESSAGE_DELETE')
                     THEN {_snowflake("{d,id}")} END,
                {_snowflake("{d,message_id}")})
        """
    )
    for columns, name in (
        (["author_id", "id"], "ix_inbox_author"),
        (["channel_id"], "ix_inbox_channel"),
        (["message_id"], "ix_inbox_message"),
    ):
        where = sa.text(f"{columns[0]} IS NOT NULL")
        op.create_index(name, "inbox", columns, postgresql_where=where)

    # A person's ledger rows are redacted in id order, a batch at a time.
    op.drop_index("ix_memory_log_user", table_name="memory_log")
    op.create_index("ix_memory_log_user", "memory_log", ["user_id", "id"])
    # A person's observations and signals are deleted in id order, a batch at a time.
    for table in ("observations", "signals"):
        op.drop_index(f"ix_{table}_user_id", table_name=table)
        op.create_index(f"ix_{table}_user_id", table, ["user_id", "id"])
    op.create_index("ix_observations_message", "observations", ["message_id"])
    op.create_index("ix_observations_channel", "observations", ["channel_id"])
    op.create_index("ix_pins_created_by", "pins", ["created_by"])

    # Provenance of derived artifacts (NULL: made before this revision).
    op.add_column("episodes", sa.Column("source_user_ids", _IDS, nullable=True))
    op.create_index("ix_episodes_sources", "episodes", ["source_user_ids"], postgresql_using="gin")
    op.add_column("nightly_runs", sa.Column("diary_user_ids", _IDS, nullable=True))
    op.add_column("style_overrides", sa.Column("source_user_ids", _IDS, nullable=True))
    op.add_column(
        "agent_sessions",
        sa.Column("author_ids", _IDS, server_default=sa.text("'{}'::bigint[]"), nullable=False),
    )
    op.create_index(
        "ix_agent_sessions_authors", "agent_sessions", ["author_ids"], postgresql_using="gin"
    )


def downgrade() -> None:
    op.drop_index("ix_agent_sessions_authors", table_name="agent_sessions")
    op.drop_column("agent_sessions", "author_ids")
    op.drop_column("style_overrides", "source_user_ids")
    op.drop_column("nightly_runs", "diary_user_ids")
    op.drop_index("ix_episodes_sources", table_name="episodes")
    op.drop_column("episodes", "source_user_ids")
    op.drop_index("ix_pins_created_by", table_name="pins")
    op.drop_index("ix_observations_channel", table_name="observations")
    op.drop_index("ix_observations_message", table_name="observations")
    for table in ("observations", "signals"):
        op.drop_index(f"ix_{table}_user_id", table_name=table)
        op.create_index(f"ix_{table}_user_id", table, ["user_id"])
    op.drop_index("ix_memory_log_user", table_name="memory_log")
    op.create_index("ix_memory_log_user", "memory_log", ["user_id"])
    for name in ("ix_inbox_author", "ix_inbox_channel", "ix_inbox_message"):
        op.drop_index(name, table_name="inbox")
    for column in ("author_id", "channel_id", "message_id"):
        op.drop_column("inbox", column)
    op.drop_index("ix_messages_author_name", table_name="messages")
    op.drop_index("ix_messages_mentions", table_name="messages")
    op.drop_index("ix_messages_reply_to", table_name="messages")
    op.drop_index("ix_messages_author_id", table_name="messages")
    op.create_index("ix_messages_author_id", "messages", ["author_id"])
    op.drop_column("messages", "mention_ids")
    op.drop_table("message_tombstones")
    op.drop_index("uq_erasures_running", table_name="erasures")
    op.drop_index("ix_erasures_user", table_name="erasures")
    op.drop_table("erasures")
