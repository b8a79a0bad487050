"""The job-queue seam: domain code enqueues by job name and ids; only ARQ adapters know ARQ."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, Concatenate, Generic, ParamSpec, Protocol

P = ParamSpec("P")


class JobQueue(Protocol):
    async def enqueue(
        self,
        job: str,
        *args: object,
        job_id: str | None = None,
        defer_s: float = 0,
        **kwargs: object,
    ) -> bool:
        """Enqueue ``job`` with plain arguments (ids, never ORM objects), to run now or
        ``defer_s`` seconds from now.

        Returns False when a job with the same ``job_id`` is already queued or running."""
        ...

    async def enqueue_many(self, job: str, calls: Sequence[tuple[tuple[object, ...], str]]) -> None:
        """Enqueue many ``(args, job_id)`` calls of one job in one round trip; a job id
        already queued or running is left as it is."""
        ...


@dataclass(frozen=True, slots=True)
class Job(Generic[P]):
    """A job's name and its parameters, spelled once: ``body`` is what the worker runs (given
    its services first), and ``send`` enqueues it with arguments mypy checks against that
    same signature, so the sender and the worker cannot disagree."""

    name: str
    body: Callable[Concatenate[Any, P], Awaitable[object]]

    def send(
        self, queue: JobQueue, job_id: str, *, defer_s: float = 0
    ) -> Callable[P, Awaitable[bool]]:
        async def enqueue(*args: P.args, **kwargs: P.kwargs) -> bool:
            return await queue.enqueue(self.name, *args, job_id=job_id, defer_s=defer_s, **kwargs)

        return enqueue
