"""ARQ's worker, made to ride out a Redis outage in the same process and to start a job the
moment it is queued.

ARQ 0.28 lets any Redis error in its loop escape ``Worker.main``: the poll, a job's claim, or
``finish_job`` after a job ran, and the process exits. This subclass keeps the process and
its in-flight jobs: the poll backs off and tries again, a claim that fails is released, a job
that ran waits for Redis to record that it finished, and a job whose record could not even be
read is released to run again. Exactly-once side effects stay where they are (per-event step
records, Discord nonces): a job that runs twice does its effects once.

ARQ polls its queue every ``poll_delay``; a short delay costs CPU while idle, a long one
latency. Here the worker also listens for the wake-up every enqueue publishes
(``app.kit.arqueue``) and for its own jobs finishing, polling at once on either; the poll
delay is only the fallback for a lost wake-up."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import sys
import time
from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import Any, TypeVar, cast

from arq.constants import in_progress_key_prefix
from arq.utils import timestamp_ms
from arq.worker import Worker
from prometheus_client import Counter, Gauge
from redis.exceptions import RedisError, ResponseError, WatchError

from app.kit.arqueue import wake_channel

log = logging.getLogger("app.worker.redis")

T = TypeVar("T")

# What "Redis is unreachable" looks like: redis-py's connection and timeout errors are
# RedisErrors, a reset socket can surface as a bare OSError.
REDIS_FAILURES: tuple[type[BaseException], ...] = (RedisError, OSError)

REDIS_UP = Gauge("worker_redis_up", "1 while the worker reaches Redis, 0 during an outage")
REDIS_OUTAGES = Counter("worker_redis_outages_total", "Redis outages this worker rode out")


class Backoff:
    """Capped exponential delays with jitter: 0.1 s, 0.2 s, … up to ``cap``."""

    def __init__(self, first: float = 0.1, cap: float = 2.0) -> None:
        self.first, self.cap = first, cap
        self.failures = 0

    def next(self) -> float:
        delay: float = min(self.cap, self.first * 2.0**self.failures)
        self.failures += 1
        return delay * random.uniform(0.5, 1.0)

    def reset(self) -> None:
        self.failures = 0


class RedisOutage:
    """One warning when Redis is first lost and one line when it is back, however many calls
    fail in between."""

    def __init__(self, on_recovery: Callable[[], None]) -> None:
        self.since: float | None = None
        self._on_recovery = on_recovery

    def failed(self, during: str, exc: BaseException) -> None:
        if self.since is None:
            self.since = time.monotonic()
            REDIS_UP.set(0)
            REDIS_OUTAGES.inc()
            log.warning(
                "Redis unreachable; retrying with backoff",
                extra={"during": during, "error": type(exc).__name__},
            )

    def recovered(self) -> None:
        """Record a successful call: the first after an outage ends it."""
        if self.since is None:
            return
        down_s = round(time.monotonic() - self.since, 1)
        self.since = None
        REDIS_UP.set(1)
        log.info("Redis reachable again", extra={"down_s": down_s})
        self._on_recovery()


class ResilientWorker(Worker):
    """``arq.worker.Worker`` that survives Redis outages (see the module docstring)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._adopt()

    def _adopt(self) -> None:
        """Our state, for a worker built as this class or upgraded to it (``adopt_worker``)."""
        self._outage = RedisOutage(on_recovery=self._redis_back)
        self._poll_backoff = Backoff()
        REDIS_UP.set(1)
        # ARQ sleeps poll_delay between polls; we wait on a wake-up instead, at most that long.
        self._idle_poll_s = self.poll_delay_s
        self.poll_delay_s = 0.0
        self._wake = asyncio.Event()
        self._listener: asyncio.Task[None] | None = None

    def _redis_back(self) -> None:
        self._last_health_check = 0  # a restarted Redis lost the health-check key: write it now

    # -- the loop -------------------------------------------------------------------------

    async def _poll_iteration(self) -> None:
        self._listen()
        # Cleared before the queue is read: a wake-up from now on means another read.
        self._wake.clear()
        try:
            await super()._poll_iteration()
        except REDIS_FAILURES as exc:
            self._outage.failed("poll", exc)
            await asyncio.sleep(self._poll_backoff.next())
            return
        self._poll_backoff.reset()
        self._outage.recovered()
        await self._idle()

    async def _idle(self) -> None:
        """Until a wake-up, or the fallback poll delay."""
        if self.burst or self._idle_poll_s <= 0:
            return
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(self._idle_poll_s):
                await self._wake.wait()

    async def heart_beat(self) -> None:
        # ARQ moves each cron job's next run on before its enqueue has succeeded: put them
        # back when Redis fails, so an outage at 03:00 delays the night instead of skipping it
        # (cron job ids are unique per run time, so a retried enqueue is not a second run).
        planned = [(job, job.next_run) for job in self.cron_jobs]
        try:
            await self.record_health()
            # Cron runs are queued this far ahead (deferred to their time): at least one poll.
            await self.run_cron(datetime.now(tz=self.timezone), max(self._idle_poll_s, 0.5))
        except REDIS_FAILURES:
            for job, next_run in planned:
                job.next_run = next_run
            raise

    # -- wake-ups -------------------------------------------------------------------------

    def _listen(self) -> None:
        if self.burst or self._idle_poll_s <= 0:
            return
        if self._listener is None or self._listener.done():
            self._listener = asyncio.create_task(self._wakeups(), name="arq-wakeups")

    async def _wakeups(self) -> None:
        """Set the wake-up on every message of the queue's channel; resubscribe after a lost
        connection (meanwhile the fallback poll runs)."""
        channel = wake_channel(self.pool, self.queue_name)
        backoff = Backoff()
        while True:
            try:
                async with self.pool.pubsub() as pubsub:
                    await pubsub.subscribe(channel)
                    backoff.reset()
                    self._wake.set()  # whatever was queued while nobody listened
                    async for message in pubsub.listen():
                        if message["type"] == "message":
                            self._wake.set()
            except REDIS_FAILURES:
                await asyncio.sleep(backoff.next())

    def _job_done(self, _: object) -> None:
        self._release_sem_dec_counter_on_complete()
        self._wake.set()  # a slot is free: look at the queue again now

    # -- claiming a job -------------------------------------------------------------------

    async def start_jobs(self, job_ids: list[bytes]) -> None:
        """ARQ's own, except that a claim failing on Redis gives its slot back, and a job that
        finishes wakes the loop."""
        for raw_id in job_ids:
            running = self.tasks.get(raw_id.decode())
            if running is not None and not running.done():
                continue  # ours and running: no need to ask Redis (ARQ would, three times)
            await self.sem.acquire()
            if self.job_counter >= self.max_jobs:
                self.sem.release()
                return
            self.job_counter += 1
            job_id = raw_id.decode()
            try:
                score = await self._claim(job_id)
            except BaseException:
                self._release_sem_dec_counter_on_complete()
                raise
            if score is None:
                self._release_sem_dec_counter_on_complete()
                continue
            task = self.loop.create_task(self.run_job(job_id, score))
            task.add_done_callback(self._job_done)
            self.tasks[job_id] = task

    async def _claim(self, job_id: str) -> int | None:
        """Mark the job in progress; its score, or None when it is not ours to run (running
        elsewhere, already finished, deferred, or the watch broke with the connection)."""
        in_progress_key = in_progress_key_prefix + job_id
        try:
            async with self.pool.pipeline(transaction=True) as pipe:
                await pipe.watch(in_progress_key)
                ongoing = await pipe.exists(in_progress_key)
                score = await pipe.zscore(self.queue_name, job_id)
                if ongoing or not score or score > timestamp_ms():
                    return None
                pipe.multi()  # type: ignore[no-untyped-call]
                pipe.psetex(in_progress_key, int(self.in_progress_timeout_s * 1000), b"1")
                await pipe.execute()
        except (ResponseError, WatchError):
            return None
        return int(score)

    # -- running and finishing it ---------------------------------------------------------

    async def run_job(self, job_id: str, score: int) -> None:
        try:
            await super().run_job(job_id, score)
        except REDIS_FAILURES as exc:
            # Only reading the job can fail here (finishing retries by itself), so it has
            # not run: release the claim, so it runs once Redis is back rather than when the
            # claim lapses (the longest job timeout + 10 s).
            self._outage.failed("job start", exc)
            await self._until_redis(lambda: self.pool.delete(in_progress_key_prefix + job_id))

    async def finish_job(
        self,
        job_id: str,
        finish: bool,
        result_data: bytes | None,
        result_timeout_s: float | None,
        keep_result_forever: bool,
        incr_score: int | None,
        keep_in_progress: float | None,
    ) -> None:
        finish_job = super().finish_job
        await self._until_redis(
            lambda: finish_job(
                job_id,
                finish,
                result_data,
                result_timeout_s,
                keep_result_forever,
                incr_score,
                keep_in_progress,
            )
        )

    async def finish_failed_job(self, job_id: str, result_data: bytes | None) -> None:
        finish_failed_job = super().finish_failed_job
        await self._until_redis(lambda: finish_failed_job(job_id, result_data))

    async def _until_redis(self, call: Callable[[], Awaitable[T]]) -> T:
        """``call()``, tried again with backoff for as long as Redis is unreachable."""
        backoff = Backoff()
        while True:
            try:
                result = await call()
            except REDIS_FAILURES as exc:
                self._outage.failed("finish", exc)
                await asyncio.sleep(backoff.next())
            else:
                self._outage.recovered()
                return result

    async def close(self) -> None:
        if self._listener is not None:
            self._listener.cancel()
            await asyncio.gather(self._listener, return_exceptions=True)
        # ARQ's close deletes the health-check key first; with Redis down that must not stop
        # the shutdown hook from closing the database and clients.
        try:
            await super().close()
        except REDIS_FAILURES:
            if self.on_shutdown:
                await self.on_shutdown(self.ctx)
            self._pool = None


def adopt_worker() -> ResilientWorker:
    """Make the ARQ worker whose ``on_startup`` calls this a ``ResilientWorker``.

    ``arq app.worker.WorkerSettings`` (the contract's command) builds ``arq.worker.Worker``
    from the settings class and has no setting for a subclass; neither does ``create_worker``
    (the local dev stack). The startup hook runs inside that worker's ``main()``, so the
    worker is found on the calling frames and given this class before its loop starts."""
    frame = sys._getframe(1)
    while frame is not None:
        candidate = frame.f_locals.get("self")
        if isinstance(candidate, Worker):
            if isinstance(candidate, ResilientWorker):
                return candidate
            candidate.__class__ = ResilientWorker
            upgraded = cast(ResilientWorker, candidate)
            upgraded._adopt()
            return upgraded
        frame = frame.f_back  # type: ignore[assignment]
    raise RuntimeError("adopt_worker() must be called from an ARQ worker's on_startup")
