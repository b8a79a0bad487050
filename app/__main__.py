"""Operator commands.

`python -m app import --sqlite PATH [--legacy-json PATH] [--dry-run]` reads only DATABASE_URL,
so an import needs none of the bot's other settings. `python -m app dev [--data-dir DIR]
[--port N]` runs the whole bot locally on embedded Postgres and Redis (the `local` extra),
with the playground at /playground."""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from pathlib import Path

from sqlalchemy.exc import SQLAlchemyError

from app.db import create_engine, create_session_factory
from app.ops.import_plan import ImportReport
from app.ops.importer import import_legacy
from app.ops.legacy import ImportFailed


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m app")
    commands = parser.add_subparsers(dest="command", required=True)
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
    engine = create_engine(database_url, pool_size=1)
    try:
        return await import_legacy(
            create_session_factory(engine),
            sqlite_path=args.sqlite,
            legacy_json=args.legacy_json,
            dry_run=args.dry_run,
        )
    finally:
        await engine.dispose()


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.command == "dev":
        from app.dev.stack import Options, run

        return run(Options(data_dir=args.data_dir, port=args.port))
    database_url = os.environ.get("DATABASE_URL", "")
    if not database_url.startswith("postgresql+asyncpg://"):
        print("DATABASE_URL must be set to postgresql+asyncpg://…", file=sys.stderr)
        return 2
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
