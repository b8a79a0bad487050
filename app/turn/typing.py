""" "Bot is typing…" while a turn writes its reply. Discord shows the indicator for about ten
seconds per call, so the worker running the turn renews it until the reply is about to be
posted. It runs beside the turn: a slow or failed call is a log line, never a delay."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from types import TracebackType
from typing import Protocol

log = logging.getLogger(__name__)

# Under Discord's ~10 s with room for a slow call: renewed at least every 8 s.
RENEW_EVERY_S = 7.0


class CanType(Protocol):
    async def trigger_typing(self, channel_id: int) -> None: ...


class Typing:
    """Started once the turn decides to write (``start``, idempotent, never blocking);
    stopped when the block ends, before the reply is posted, so no indicator outlives it."""

    def __init__(self, discord: CanType, channel_id: int, *, every_s: float = RENEW_EVERY_S):
        self._discord = discord
        self._channel_id = channel_id
        self._every_s = every_s
        self._task: asyncio.Task[None] | None = None

    @property
    def started(self) -> bool:
        return self._task is not None

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self._keep(), name=f"typing:{self._channel_id}")

    async def stop(self) -> None:
        task, self._task = self._task, None
        # A cancel that lands as the call it interrupts completes can be absorbed below us
        # (seen as a turn stuck here until its job timed out): cancel again until it ends.
        while task is not None and not task.done():
            task.cancel()
            await asyncio.wait({task}, timeout=0.05)
        if task is not None and not task.cancelled():
            with contextlib.suppress(Exception):
                task.result()

    async def __aenter__(self) -> Typing:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.stop()

    async def _keep(self) -> None:
        while True:
            began = time.monotonic()
            try:
                await self._discord.trigger_typing(self._channel_id)
            except Exception as error:  # cosmetic: whatever went wrong, the turn goes on
                log.info("typing indicator failed", extra={"error": type(error).__name__})
            await asyncio.sleep(max(0.0, self._every_s - (time.monotonic() - began)))
