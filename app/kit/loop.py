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


async def let_ready_run() -> None:
    """Let the loop run every task that is ready now before the caller goes on. A turn uses
    it to put a request on the wire ahead of its own bookkeeping: on Python 3.11 aiohttp
    (3.14) writes a request's body in a task of its own, queued behind every task already
    waiting, so the question's task must take its first step (which queues that write)
    before the turn starts more tasks. Only an order of work: nothing depends on it."""
    await asyncio.sleep(0)


def run_main(main: Coroutine[Any, Any, T]) -> T:
    """``asyncio.run(main)`` on uvloop when it is installed."""
    if uvloop is None:  # pragma: no cover
        return asyncio.run(main)
    return uvloop.run(main)
