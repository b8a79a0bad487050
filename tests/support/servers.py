"""Run an ASGI app (a fake of an outside API, or our own app) on a real local port."""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from typing import Any

import uvicorn


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


class _Server(uvicorn.Server):
    """A uvicorn server that leaves Ctrl+C to pytest (or the benchmark), and stops as soon as
    it is told to rather than at its next 0.1 s tick (teardown runs once per test)."""

    def __init__(self, config: uvicorn.Config) -> None:
        super().__init__(config)
        self.stopping = asyncio.Event()

    @contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield

    async def main_loop(self) -> None:
        counter = 0
        while not await self.on_tick(counter):
            counter = (counter + 1) % 864_000
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.stopping.wait(), 0.1)


@asynccontextmanager
async def serve(app: Any, *, port: int | None = None, lifespan: str = "auto") -> AsyncIterator[str]:
    """Serve ``app`` on 127.0.0.1 inside the running loop; yield its base URL.

    Used by the tests and the benchmarks alike."""
    config = uvicorn.Config(
        app,
        host="127.0.0.1",
        port=port or free_port(),
        log_level="warning",
        access_log=False,
        lifespan=lifespan,  # type: ignore[arg-type]
        timeout_graceful_shutdown=1,  # a fake holding a slow answer must not stall teardown
    )
    server = _Server(config)
    task = asyncio.create_task(server.serve())
    while not server.started:
        if task.done():
            task.result()
            raise RuntimeError("server exited before starting")
        await asyncio.sleep(0.005)
    try:
        yield f"http://127.0.0.1:{config.port}"
    finally:
        server.should_exit = True
        server.stopping.set()
        await task
