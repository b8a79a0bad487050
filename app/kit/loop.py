"""The event loop the long-running processes (worker, relay) run on: uvloop, as uvicorn
already gives the API. Every turn's bookkeeping is round trips to Postgres, Redis and the
upstream APIs, and uvloop's socket handling makes them cheaper (bench.turn: the mean turn
443 ms against 452 ms on the standard loop, one quiet run each). Where uvloop does not build
(Windows), the standard loop."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")

try:
    import uvloop
except ImportError:  # pragma: no cover - not on the platforms we ship
    uvloop = None  # type: ignore[assignment]


def run_main(main: Coroutine[Any, Any, T]) -> T:
    """``asyncio.run(main)`` on uvloop when it is installed."""
    if uvloop is None:  # pragma: no cover
        return asyncio.run(main)
    return uvloop.run(main)
