"""Job instrumentation: every worker job counted by name and outcome, and timed."""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Callable, Coroutine
from typing import Any, ParamSpec, TypeVar

from prometheus_client import Counter, Gauge, Histogram

from app.kit.logs import log_context

log = logging.getLogger("app.jobs")

JOBS = Counter("jobs_total", "Worker jobs by name and outcome", ["job", "outcome"])
JOB_SECONDS = Histogram(
    "job_seconds",
    "Worker job duration",
    ["job"],
    buckets=(0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 100),
)
INBOX_BACKLOG = Gauge("inbox_backlog", "Recorded events no job has finished (at the last sweep)")

P = ParamSpec("P")
R = TypeVar("R")


Job = Callable[P, Coroutine[Any, Any, R]]


def instrumented(name: str) -> Callable[[Job[P, R]], Job[P, R]]:
    def wrap(job: Job[P, R]) -> Job[P, R]:
        @functools.wraps(job)
        async def run(*args: P.args, **kwargs: P.kwargs) -> R:
            started = time.perf_counter()
            outcome = "error"
            with log_context(job=name):
                try:
                    result = await job(*args, **kwargs)
                    outcome = "ok"
                    return result
                except BaseException as exc:
                    outcome = "cancelled" if not isinstance(exc, Exception) else "error"
                    log.warning("job failed", extra={"error": type(exc).__name__}, exc_info=True)
                    raise
                finally:
                    JOBS.labels(job=name, outcome=outcome).inc()
                    JOB_SECONDS.labels(job=name).observe(time.perf_counter() - started)

        return run

    return wrap
