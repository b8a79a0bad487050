"""Operator commands.

`python -m app worker` runs the worker (turns, memory jobs, consolidation, the nightly run and
the sweeper) until SIGTERM, then drains. `python -m app import --sqlite PATH [--legacy-json
PATH] [--dry-run]` reads only DATABASE_URL (and DATABASE_TRANSACTION_POOLING), so an import
needs none of the bot's other settings; so does `python -m app wait-for-schema [--timeout S]`,
which waits until the migrations have run (a Kubernetes init container). `python -m app
register-commands [--guild ID]` registers the slash commands with Discord and reads only
DISCORD_BOT_TOKEN and DISCORD_API_BASE. `python -m app dev
[--data-dir DIR] [--port N]` runs the whole bot locally on embedded Postgres and Redis (the
`local` extra), with the playground at /playground."""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from pathlib import Path

from alembic.util import CommandError
from sqlalchemy.exc import SQLAlchemyError

from app.db import create_engine, create_session_factory, transaction_pooling_from_env
from app.kit.logs import configure_logging
from app.ops.import_plan import ImportReport
from app.ops.importer import import_legacy
from app.ops.legacy import ImportFailed
from app.ops.schema import load_migrations, wait_for_schema


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m app")
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser(
        "worker",
        help="run the worker until SIGTERM or SIGINT, then drain (WORKER_DRAIN_GRACE_S) and exit",
    )
    wait = commands.add_parser(
        "wait-for-schema",
        help="wait until DATABASE_URL's schema is at this release's migration head (or newer)",
    )
    wait.add_argument(
        "--timeout", type=float, default=600.0, help="give up after this many seconds (600)"
    )
    wait.add_argument(
        "--config", type=Path, default=Path("alembic.ini"), help="alembic.ini (./alembic.ini)"
    )
    load = commands.add_parser(
        "import",
        help="load an existing deployment (the original bot's SQLite database, legacy "
        "per-channel memory strings) into DATABASE_URL",
    )
    load.add_argument("--sqlite", type=Path, help="the original bot's SQLite database")
    load.add_argument(
        "--legacy-json",
        type=Path,
        help='legacy memory strings: {"<channel_id>": "memory string", ...}; each an episode',
    )
    load.add_argument(
        "--dry-run", action="store_true", help="report what would be inserted; write nothing"
    )
    register = commands.add_parser(
        "register-commands",
        help="register the slash commands with Discord (a bulk overwrite: running it again "
        "replaces them, never doubles them); needs DISCORD_BOT_TOKEN",
    )
    register.add_argument(
        "--guild", type=int, help="register in this guild only (at once) instead of globally"
    )
    dev = commands.add_parser(
        "dev",
        help="run the bot locally: embedded Postgres and Redis (unless DATABASE_URL / "
        "REDIS_URL are set), migrations, API, worker, decision model and the playground",
    )
    dev.add_argument(
        "--data-dir",
        type=Path,
        default=Path(".data"),
        help="where the embedded servers keep their data and the generated secrets "
        "(default: .data)",
    )
    dev.add_argument(
        "--port", type=int, default=8000, help="the API's port on 127.0.0.1 (default: 8000)"
    )
    return parser


async def _import(database_url: str, args: argparse.Namespace) -> ImportReport:
    engine = create_engine(
        database_url, pool_size=1, transaction_pooling=transaction_pooling_from_env()
    )
    try:
        return await import_legacy(
            create_session_factory(engine),
            sqlite_path=args.sqlite,
            legacy_json=args.legacy_json,
            dry_run=args.dry_run,
        )
    finally:
        await engine.dispose()


def _wait_for_schema(database_url: str, args: argparse.Namespace) -> int:
    configure_logging()
    try:
        migrations = load_migrations(args.config)
    except (CommandError, OSError) as exc:
        print(f"cannot read the migrations from {args.config}: {exc}", file=sys.stderr)
        return 2
    ready = asyncio.run(wait_for_schema(database_url, migrations, timeout_s=args.timeout))
    if not ready:
        print(f"the schema did not reach this release's head within {args.timeout:.0f} s")
    return 0 if ready else 1


def _register_commands(guild_id: int | None) -> int:
    import httpx

    from app.commands.register import register_commands
    from app.discord.client import DiscordClient
    from app.discord.errors import DiscordError
    from app.kit.tls import httpx_tls

    token = os.environ.get("DISCORD_BOT_TOKEN", "").strip()
    if not token:
        print("DISCORD_BOT_TOKEN must be set", file=sys.stderr)
        return 2
    api_base = os.environ.get("DISCORD_API_BASE", "").strip() or "https://discord.com/api/v10"

    async def register() -> str:
        async with httpx.AsyncClient(verify=httpx_tls()) as http:
            discord = DiscordClient(http, token=token, api_base=api_base)
            return (await register_commands(discord, guild_id=guild_id)).render()

    try:
        print(asyncio.run(register()))
    except DiscordError as exc:
        print(f"registration failed: {exc}", file=sys.stderr)  # never holds the token
        return 1
    return 0


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.command == "dev":
        from app.dev.stack import Options, run

        return run(Options(data_dir=args.data_dir, port=args.port))
    if args.command == "worker":
        from app.worker import main as worker

        return worker()
    if args.command == "register-commands":
        return _register_commands(args.guild)
    database_url = os.environ.get("DATABASE_URL", "")
    if not database_url.startswith("postgresql+asyncpg://"):
        print("DATABASE_URL must be set to postgresql+asyncpg://…", file=sys.stderr)
        return 2
    if args.command == "wait-for-schema":
        return _wait_for_schema(database_url, args)
    try:
        report = asyncio.run(_import(database_url, args))
    except ImportFailed as exc:
        print(f"import failed, nothing was written: {exc}", file=sys.stderr)
        return 2
    except (SQLAlchemyError, OSError) as exc:
        # The driver's message names the problem; the URL (and its password) is not printed.
        print(f"import failed, nothing was written: database error: {exc!s:.300}", file=sys.stderr)
        return 1
    print(report.render())
    return 0


if __name__ == "__main__":
    sys.exit(main())
