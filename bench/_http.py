"""A lean HTTP/1.1 keep-alive load generator, so the client is not the bottleneck."""

from __future__ import annotations

import asyncio
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass


@dataclass
class Result:
    name: str
    requests: int
    seconds: float
    latencies: list[float]
    statuses: dict[int, int]

    @property
    def rps(self) -> float:
        return self.requests / self.seconds

    def percentile(self, q: float) -> float:
        ordered = sorted(self.latencies)
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000

    def line(self) -> str:
        mean = statistics.fmean(self.latencies) * 1000
        return (
            f"{self.name:<28} {self.rps:9.0f} req/s   p50 {self.percentile(0.5):7.2f} ms"
            f"   p99 {self.percentile(0.99):7.2f} ms   mean {mean:7.2f} ms"
            f"   statuses {dict(sorted(self.statuses.items()))}"
        )


async def _worker(
    host: str,
    port: int,
    path: str,
    headers: dict[str, str],
    bodies: Callable[[], bytes | None],
    result: Result,
) -> None:
    reader, writer = await asyncio.open_connection(host, port)
    head = "".join(f"{k}: {v}\r\n" for k, v in headers.items())
    try:
        while (body := bodies()) is not None:
            started = time.perf_counter()
            writer.write(
                f"POST {path} HTTP/1.1\r\nHost: {host}\r\n{head}"
                f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n".encode()
                + body
            )
            status_line = await reader.readline()
            length = 0
            while (line := await reader.readline()) not in (b"\r\n", b""):
                name, _, value = line.partition(b":")
                if name.strip().lower() == b"content-length":
                    length = int(value)
            await reader.readexactly(length)
            result.latencies.append(time.perf_counter() - started)
            status = int(status_line.split()[1])
            result.statuses[status] = result.statuses.get(status, 0) + 1
    finally:
        writer.close()


async def load(
    name: str,
    url: str,
    *,
    bodies: Callable[[], bytes | None],
    concurrency: int,
    headers: dict[str, str] | None = None,
) -> Result:
    host, _, rest = url.removeprefix("http://").partition(":")
    port_text, _, path = rest.partition("/")
    result = Result(name, 0, 0.0, [], {})
    started = time.perf_counter()
    await asyncio.gather(
        *(
            _worker(host, int(port_text), "/" + path, headers or {}, bodies, result)
            for _ in range(concurrency)
        )
    )
    result.seconds = time.perf_counter() - started
    result.requests = len(result.latencies)
    return result
