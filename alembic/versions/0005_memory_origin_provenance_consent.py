"""Where a memory was learned (origin), which messages it came from (sources), who paused
learning (consent); observations and episodes carry their guild; the admin actor.

Backfill: a memory's origin is found from its ledger's triggers — a reply's trigger message,
a consolidation batch's channel, a nightly chunk's speaker in that night's window — and is
the narrowest of all its adds and updates: one guild when every one was in that guild, the
owner's DMs only otherwise. A memory with any change whose place cannot be found (imported,
or its messages gone) is `unknown`, which is recalled only in its owner's DMs. The column's
default, for rows written by hand later, is `any`.

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-01 16:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa

from alembic import op

revision: str = "0005"
down_revision: str | None = "0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

ACTORS = (
    "'extraction', 'reply', 'command', 'nightly', 'consolidation', 'staff', 'retention', 'forgetme'"
)

# The place ('dm' or the guild id as text) each memory change was learned in, or NULL.
_PLACES = """
    SELECT l.memory_id,
        CASE
        WHEN l.trigger ~ '^reply:[0-9]{1,19}$' THEN (
            SELECT coalesce(m.guild_id::text, 'dm') FROM messages AS m
            WHERE m.id = substring(l.trigger FROM 7)::bigint)
        WHEN l.trigger ~ '^consolidation:[0-9]{1,19}:' THEN (
            SELECT coalesce(m.guild_id::text, 'dm') FROM messages AS m
            WHERE m.channel_id = split_part(l.trigger, ':', 2)::bigint LIMIT 1)
        WHEN l.trigger ~ '^nightly:[0-9]+:[0-9]{1,19}:' THEN (
            SELECT CASE WHEN count(DISTINCT coalesce(m.guild_id, 0)) = 1
                        THEN coalesce(max(m.guild_id)::text, 'dm') END
            FROM messages AS m JOIN nightly_runs AS r
              ON r.id = split_part(l.trigger, ':', 2)::bigint
            WHERE m.author_id = split_part(l.trigger, ':', 3)::bigint
              AND m.created_at >= r.window_start AND m.created_at < r.window_end)
        END AS place
    FROM memory_log AS l
    WHERE l.action IN ('add', 'update') AND l.memory_id IS NOT NULL
"""


def upgrade() -> None:
    op.add_column(
        "memories",
        sa.Column("origin", sa.Text(), server_default=sa.text("'unknown'"), nullable=False),
    )
    op.add_column("memories", sa.Column("origin_guild_id", sa.BigInteger(), nullable=True))
    op.execute(
        f"""
        WITH places AS ({_PLACES}),
        per_memory AS (
            SELECT memory_id,
                   bool_or(place IS NULL) AS unknown,
                   count(DISTINCT place) AS distinct_places,
                   max(place) AS place
            FROM places GROUP BY memory_id
        )
        UPDATE memories AS mem SET
            origin = CASE
                WHEN p.unknown THEN 'unknown'
                WHEN p.distinct_places = 1 AND p.place = 'dm' THEN 'dm'
                WHEN p.distinct_places = 1 THEN 'guild'
                ELSE 'dm' END,
            origin_guild_id = CASE
                WHEN NOT p.unknown AND p.distinct_places = 1 AND p.place <> 'dm'
                THEN p.place::bigint END
        FROM per_memory AS p
        WHERE p.memory_id = mem.id
        """
    )
    op.alter_column("memories", "origin", server_default=sa.text("'any'"))
    op.create_check_constraint(
        op.f("ck_memories_origin"), "memories", "origin IN ('any', 'guild', 'dm', 'unknown')"
    )
    op.create_check_constraint(
        op.f("ck_memories_origin_guild"),
        "memories",
        "(origin = 'guild') = (origin_guild_id IS NOT NULL)",
    )

    op.create_table(
        "memory_sources",
        sa.Column("id", sa.BigInteger(), sa.Identity(always=False), nullable=False),
        sa.Column("memory_id", sa.BigInteger(), nullable=False),
        sa.Column("message_id", sa.BigInteger(), nullable=False),
        sa.Column("channel_id", sa.BigInteger(), nullable=False),
        sa.Column("guild_id", sa.BigInteger(), nullable=True),
        sa.Column("trigger", sa.Text(), nullable=True),
        sa.Column(
            "created_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_memory_sources")),
        sa.UniqueConstraint(
            "memory_id", "message_id", name=op.f("uq_memory_sources_memory_id_message_id")
        ),
    )
    op.create_index("ix_memory_sources_message_id", "memory_sources", ["message_id"], unique=False)
    # A reply's trigger message is the one source the ledger names exactly.
    op.execute(
        """
        INSERT INTO memory_sources (memory_id, message_id, channel_id, guild_id, trigger,
                                    created_at)
        SELECT DISTINCT ON (l.memory_id, m.id) l.memory_id, m.id, m.channel_id, m.guild_id,
               l.trigger, l.created_at
        FROM memory_log AS l JOIN messages AS m ON m.id = substring(l.trigger FROM 7)::bigint
        JOIN memories AS mem ON mem.id = l.memory_id
        WHERE l.action IN ('add', 'update') AND l.trigger ~ '^reply:[0-9]{1,19}$'
        ORDER BY l.memory_id, m.id, l.id
        """
    )

    op.create_table(
        "memory_consent",
        sa.Column("user_id", sa.BigInteger(), autoincrement=False, nullable=False),
        sa.Column(
            "paused_at", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False
        ),
        sa.PrimaryKeyConstraint("user_id", name=op.f("pk_memory_consent")),
    )

    op.add_column("observations", sa.Column("guild_id", sa.BigInteger(), nullable=True))
    op.add_column("episodes", sa.Column("guild_id", sa.BigInteger(), nullable=True))
    for table in ("observations", "episodes"):
        op.execute(
            f"""
            UPDATE {table} AS t SET guild_id = (
                SELECT m.guild_id FROM messages AS m WHERE m.channel_id = t.channel_id LIMIT 1)
            """
        )

    op.drop_constraint(op.f("ck_memory_log_actor"), "memory_log", type_="check")
    op.create_check_constraint(
        op.f("ck_memory_log_actor"), "memory_log", f"actor IN ({ACTORS}, 'admin')"
    )


def downgrade() -> None:
    op.drop_constraint(op.f("ck_memory_log_actor"), "memory_log", type_="check")
    op.execute("DELETE FROM memory_log WHERE actor = 'admin'")
    op.create_check_constraint(op.f("ck_memory_log_actor"), "memory_log", f"actor IN ({ACTORS})")
    op.drop_column("episodes", "guild_id")
    op.drop_column("observations", "guild_id")
    op.drop_table("memory_consent")
    op.drop_index("ix_memory_sources_message_id", table_name="memory_sources")
    op.drop_table("memory_sources")
    op.drop_constraint(op.f("ck_memories_origin_guild"), "memories", type_="check")
    op.drop_constraint(op.f("ck_memories_origin"), "memories", type_="check")
    op.drop_column("memories", "origin_guild_id")
    op.drop_column("memories", "origin")
