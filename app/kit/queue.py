"""The job-queue seam: domain code enqueues by job name and ids; only ARQ adapters know ARQ."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol


class JobQueue(Protocol):
    async def enqueue(
        self, job: str, *args: object, job_id: str | None = None, defer_s: float = 0
    ) -> bool:
        """Enqueue ``job`` with plain arguments (ids, never ORM objects), to run now or
        ``defer_s`` seconds from now.

        Returns False when a job with the same ``job_id`` is already queued or running."""
        ...

    async def enqueue_many(self, job: str, calls: Sequence[tuple[tuple[object, ...], str]]) -> None:
        """Enqueue many ``(args, job_id)`` calls of one job in one round trip; a job id
        already queued or running is left as it is."""
        ...
