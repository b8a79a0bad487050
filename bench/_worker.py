"""The real worker as its own process, for bench.turn, bench.idle and bench.scale.

    python -m bench._worker [poll_delay_seconds]

Without an argument it runs exactly as ``python -m app worker`` does (SIGTERM drains); the
optional argument overrides the fallback poll delay, only to show how much of a turn is
queue pickup."""

from __future__ import annotations

import sys

from app import worker


def main() -> int:
    overrides = {"poll_delay": float(sys.argv[1])} if len(sys.argv) > 1 else {}
    return worker.main(**overrides)


if __name__ == "__main__":
    sys.exit(main())
