"""The real worker (app.worker.WorkerSettings) as its own process, for bench.turn.

    python -m bench._worker [poll_delay_seconds]

Without an argument it runs exactly as ``arq app.worker.WorkerSettings`` does; the optional
argument overrides ARQ's poll delay, only to show how much of a turn is queue pickup."""

from __future__ import annotations

import sys

from arq.worker import run_worker

from app.worker import WorkerSettings


def main() -> None:
    overrides = {"poll_delay": float(sys.argv[1])} if len(sys.argv) > 1 else {}
    run_worker(WorkerSettings, **overrides)  # type: ignore[arg-type]


if __name__ == "__main__":
    main()
