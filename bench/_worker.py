"""The real worker as its own process, for bench.turn, bench.idle and bench.scale.

    python -m bench._worker [poll_delay_seconds]

Without an argument it runs exactly as ``python -m app worker`` does (SIGTERM drains); the
optional argument overrides the fallback poll delay, only to show how much of a turn is
queue pickup. Its metrics port also counts the statements and transactions the worker sends
to Postgres (``bench_worker_db_*``): bench.turn reads them around its measured turns, a
figure of the turn's database round trips that the machine's load does not blur."""

from __future__ import annotations

import sys
from typing import Any

from prometheus_client import Counter
from sqlalchemy import event
from sqlalchemy.engine import Engine

from app import worker

STATEMENTS = Counter("bench_worker_db_statements", "Statements the worker sent to Postgres")
TRANSACTIONS = Counter("bench_worker_db_transactions", "Transactions the worker began")


def count_database_work() -> None:
    """Every statement and transaction of every engine in this process (a BEGIN and its
    COMMIT or ROLLBACK are two more round trips per transaction)."""
    event.listen(Engine, "before_cursor_execute", _statement)
    event.listen(Engine, "begin", _transaction)


def _statement(*_: Any) -> None:
    STATEMENTS.inc()


def _transaction(*_: Any) -> None:
    TRANSACTIONS.inc()


def main() -> int:
    overrides = {"poll_delay": float(sys.argv[1])} if len(sys.argv) > 1 else {}
    count_database_work()
    return worker.main(**overrides)


if __name__ == "__main__":
    sys.exit(main())
