"""Run an erasure to its end in this process: the worker's job body, called until done."""

from __future__ import annotations

from app.privacy.erasure import run_erasure, start_erasure
from app.privacy.store import ErasureRecord, RequestedBy, Status
from app.services import Services


async def erase_now(
    services: Services, user_id: int, *, requested_by: RequestedBy = RequestedBy.ADMIN
) -> ErasureRecord:
    erasure = await start_erasure(
        services.sessions, services.queue, user_id, requested_by=requested_by
    )
    for _ in range(1000):  # each call does batches for up to a job's budget
        done = await run_erasure(services, erasure.id)
        assert done is not None, "another job holds the erasure"
        if done.status is not Status.RUNNING:
            return done
    raise AssertionError("the erasure did not finish")
