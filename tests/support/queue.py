"""The job queue in memory, for tests and benchmarks: it keeps every job enqueued, in order,
and runs none of them; a test that plays the worker takes them off one by one."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from app.kit.queue import JobQueue


@dataclass(frozen=True, slots=True)
class Enqueued:
    """One job as it was handed to the queue."""

    job: str
    args: tuple[object, ...]
    job_id: str | None
    defer_s: float = 0
    kwargs: Mapping[str, object] = field(default_factory=dict)


@dataclass
class InMemoryQueue:
    """``jobs`` is everything ever accepted; ``pending`` what no one has taken yet. As in
    Redis, a job id that is still pending is refused (``enqueue`` answers False)."""

    jobs: list[Enqueued] = field(default_factory=list)
    pending: list[Enqueued] = field(default_factory=list)

    async def enqueue(
        self,
        job: str,
        *args: object,
        job_id: str | None = None,
        defer_s: float = 0,
        **kwargs: object,
    ) -> bool:
        return self._accept(Enqueued(job, args, job_id, defer_s, dict(kwargs)))

    async def enqueue_many(self, job: str, calls: Sequence[tuple[tuple[object, ...], str]]) -> None:
        for args, job_id in calls:
            self._accept(Enqueued(job, args, job_id))

    def take(self) -> Enqueued | None:
        """The oldest pending job, now taken by the caller (who plays the worker)."""
        return self.pending.pop(0) if self.pending else None

    def lose(self) -> None:
        """Redis went away with every pending job."""
        self.pending.clear()

    def calls(self) -> list[tuple[str, tuple[object, ...]]]:
        """Each accepted job's name and positional arguments, in order."""
        return [(e.job, e.args) for e in self.jobs]

    def _accept(self, enqueued: Enqueued) -> bool:
        if enqueued.job_id is not None and any(p.job_id == enqueued.job_id for p in self.pending):
            return False
        self.jobs.append(enqueued)
        self.pending.append(enqueued)
        return True


_: JobQueue = InMemoryQueue()
