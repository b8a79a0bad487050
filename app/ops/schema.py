"""`python -m app wait-for-schema`: wait until the database's schema is at least this
release's migration head, so a pod of the API or the worker starts only once the migration
Job has run (the Kubernetes init container; docs/operations.md, "Deployment").

A schema at a revision this release does not know was migrated by a newer release: that is
the normal state while a rolling update replaces old pods, so it counts as ready too."""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

import asyncpg
from alembic.config import Config
from alembic.script import ScriptDirectory

log = logging.getLogger("app.ops.schema")


class SchemaState(StrEnum):
    MISSING = "missing"  # no migration has run
    BEHIND = "behind"  # an older revision: the migration Job has not finished
    AT_HEAD = "at_head"
    AHEAD = "ahead"  # a revision this release does not know: a newer one migrated it

    @property
    def ready(self) -> bool:
        return self in (SchemaState.AT_HEAD, SchemaState.AHEAD)


@dataclass(frozen=True, slots=True)
class Migrations:
    """What this release's migration scripts define."""

    heads: frozenset[str]
    known: frozenset[str]


def judge(current: frozenset[str], migrations: Migrations) -> SchemaState:
    """The schema's state from the revisions in ``alembic_version``."""
    if not current:
        return SchemaState.MISSING
    if current == migrations.heads:
        return SchemaState.AT_HEAD
    if current - migrations.known:
        return SchemaState.AHEAD
    return SchemaState.BEHIND


def load_migrations(alembic_ini: Path) -> Migrations:
    script = ScriptDirectory.from_config(Config(str(alembic_ini)))
    known = frozenset(rev.revision for rev in script.walk_revisions())
    return Migrations(heads=frozenset(script.get_heads()), known=known)


async def current_revisions(database_url: str) -> frozenset[str]:
    """The revisions in ``alembic_version``; empty when no migration ran. No prepared
    statement is kept, so this works through PgBouncer in transaction mode too."""
    dsn = database_url.replace("postgresql+asyncpg://", "postgresql://", 1)
    conn = await asyncpg.connect(dsn, timeout=5, command_timeout=10, statement_cache_size=0)
    try:
        rows = await conn.fetch("SELECT version_num FROM alembic_version")
    except asyncpg.UndefinedTableError:
        return frozenset()
    finally:
        await conn.close()
    return frozenset(str(row[0]) for row in rows)


async def wait_for_schema(
    database_url: str, migrations: Migrations, *, timeout_s: float, every_s: float = 2.0
) -> bool:
    """Ask until the schema is ready (True) or ``timeout_s`` passes (False); each new state
    is logged. A database that cannot be reached yet is asked again (it may be starting)."""
    deadline = time.monotonic() + timeout_s
    last: SchemaState | str | None = None
    while True:
        try:
            state: SchemaState | str = judge(await current_revisions(database_url), migrations)
        except (OSError, asyncpg.PostgresError, TimeoutError) as exc:
            state = f"unreachable ({type(exc).__name__})"
        if state != last:
            log.info("schema %s", state, extra={"heads": sorted(migrations.heads)})
            last = state
        if isinstance(state, SchemaState) and state.ready:
            return True
        if time.monotonic() >= deadline:
            return False
        await asyncio.sleep(every_s)
