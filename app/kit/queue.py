"""The job-queue seam: domain code enqueues by job name and ids; only app/worker.py knows ARQ."""

from __future__ import annotations

from typing import Protocol


class JobQueue(Protocol):
    async def enqueue(self, job: str, *args: object, job_id: str | None = None) -> bool:
        """Enqueue ``job`` with plain arguments (ids, never ORM objects).

        Returns False when a job with the same ``job_id`` is already queued or running."""
        ...
