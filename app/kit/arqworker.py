"""ARQ's worker, made to ride out a Redis outage in the same process, to start a job the
moment it is queued, to drain on SIGTERM, and to export the queue figures to scale on.

ARQ 0.28 lets any Redis error in its loop escape ``Worker.main``: the poll, a job's claim, or
``finish_job`` after a job ran, and the process exits. This subclass keeps the process and
its in-flight jobs: the poll backs off and tries again, a claim that fails is released, a job
that ran waits for Redis to record that it finished, and a job whose record could not even be
read is released to run again. Exactly-once side effects stay where they are (per-event step
records, Discord nonces): a job that runs twice does its effects once.

ARQ polls its queue every ``poll_delay``; a short delay costs CPU while idle, a long one
latency. Here the worker also listens for the wake-up every enqueue publishes
(``app.kit.arqueue``) and for its own jobs finishing, polling at once on either; the poll
delay is only the fallback for a lost wake-up.

ARQ internals this relies on (each listed with why and fingerprinted in
``app.kit.arqinternals``; ``tests/kit/test_arq_internals.py`` fails when ARQ changes one):
``Worker.__init__``'s attributes; ``main``/``async_run`` (the loop, ended through
``main_task``); ``_poll_iteration``, ``heart_beat``, ``start_jobs``, ``run_job``,
``finish_job``, ``finish_failed_job`` and ``close``, overridden; ``record_health``,
``run_cron``, ``handle_sig`` and ``_release_sem_dec_counter_on_complete``, called;
``run_job``'s handling of a cancelled job (queued again, in-progress key deleted), which the
drain relies on; ``CronJob.next_run``; the in-progress key prefix and millisecond scores of
ARQ's claim protocol."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import time
from asyncio import FIRST_COMPLETED
from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import Any, TypeVar

from arq.constants import in_progress_key_prefix
from arq.utils import timestamp_ms
from arq.worker import Worker
from prometheus_client import Counter, Gauge
from redis.commands.core import AsyncScript
from redis.exceptions import RedisError

from app.kit.arqueue import wake_channel

log = logging.getLogger("app.worker.redis")

T = TypeVar("T")

# What "Redis is unreachable" looks like: redis-py's connection and timeout errors are
# RedisErrors, a reset socket can surface as a bare OSError.
REDIS_FAILURES: tuple[type[BaseException], ...] = (RedisError, OSError)

# ARQ's claim, for many ids at once: a job is ours when nobody has it in progress and it is
# due; marking it in progress is the claim. Stops at ARGV[5] claims (the free slots).
_CLAIM = """
local queue, now, prefix, ttl = ARGV[1], tonumber(ARGV[2]), ARGV[3], ARGV[4]
local limit = tonumber(ARGV[5])
local claimed = {}
for i = 6, #ARGV do
  if #claimed >= 2 * limit then break end
  local key = prefix .. ARGV[i]
  if redis.call('EXISTS', key) == 0 then
    local score = redis.call('ZSCORE', queue, ARGV[i])
    if score and tonumber(score) <= now then
      redis.call('PSETEX', key, ttl, '1')
      claimed[#claimed + 1] = ARGV[i]
      claimed[#claimed + 1] = score
    end
  end
end
return claimed
"""

# The due jobs, and of those the oldest no worker has started (its claim: the in-progress
# key). Looks at no more than ARGV[4] due jobs, oldest first, for one not started.
_DUE = """
local queue, now, prefix, limit = ARGV[1], ARGV[2], ARGV[3], tonumber(ARGV[4])
local due = redis.call('ZCOUNT', queue, '-inf', now)
local offset = 0
while offset < due and offset < limit do
  local batch = redis.call('ZRANGEBYSCORE', queue, '-inf', now, 'WITHSCORES', 'LIMIT', offset, 100)
  for i = 1, #batch, 2 do
    if redis.call('EXISTS', prefix .. batch[i]) == 0 then
      return {due, batch[i + 1]}
    end
  end
  offset = offset + 100
end
return {due, false}
"""
QUEUE_SAMPLE_S = 5.0
# In burst mode (run until the queue is empty) ARQ reads the queue again as soon as it has read
# it, and a job it runs stays queued until it ends: without a pause, a burst worker reads Redis
# thousands of times a second while a job runs. It waits for one of its jobs to end instead, or
# this long for a job another process queued or one deferred until now.
BURST_POLL_S = 0.05
OLDEST_SCAN_LIMIT = 1000
# A release after the grace: how long the cut-off jobs get to record it in Redis.
RELEASE_WAIT_S = 5.0

REDIS_UP = Gauge("worker_redis_up", "1 while the worker reaches Redis, 0 during an outage")
REDIS_OUTAGES = Counter("worker_redis_outages_total", "Redis outages this worker rode out")
JOBS_DUE = Gauge(
    "queue_jobs_due",
    "Jobs in the queue due now (scored at or before now): waiting or running, on any worker",
)
OLDEST_DUE = Gauge(
    "queue_oldest_due_seconds", "Age of the oldest due job that no worker has started"
)
JOBS_RUNNING = Gauge("worker_jobs_running", "Jobs this worker process runs now")
JOB_SLOTS = Gauge("worker_job_slots", "Jobs this worker process may run at once (max_jobs)")
DRAINING = Gauge("worker_draining", "1 once this worker stopped claiming jobs to shut down")
RELEASED = Counter(
    "worker_jobs_released_total",
    "Jobs a draining worker cut off at its grace period and handed back to the queue",
)


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
    """``arq.worker.Worker`` that survives Redis outages, wakes on enqueues and drains on
    request (see the module docstring). ``python -m app worker`` builds it directly."""

    def __init__(self, *args: Any, drain_grace_s: float = 20.0, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._outage = RedisOutage(on_recovery=self._redis_back)
        self._poll_backoff = Backoff()
        REDIS_UP.set(1)
        # ARQ sleeps poll_delay between polls; we wait on a wake-up instead, at most that long.
        self._idle_poll_s = self.poll_delay_s
        self.poll_delay_s = 0.0
        self._wake = asyncio.Event()
        self._listener: asyncio.Task[None] | None = None
        self._claim_script: AsyncScript | None = None
        self._queue_script: AsyncScript | None = None
        self.queue_sample_s = QUEUE_SAMPLE_S
        self._queue_sampled = 0.0
        self.drain_grace_s = drain_grace_s
        self._draining: asyncio.Task[None] | None = None
        self._cut_short = asyncio.Event()
        self.released: list[str] = []  # jobs the drain handed back to the other workers
        self.last_iteration = time.monotonic()  # the liveness probe's figure
        JOB_SLOTS.set(self.max_jobs)
        DRAINING.set(0)

    async def _claim_jobs(self, args: list[str | int]) -> list[bytes]:
        if self._claim_script is None:
            self._claim_script = self.pool.register_script(_CLAIM)
        claimed: list[bytes] = await self._claim_script(args=args)
        return claimed

    def _redis_back(self) -> None:
        self._last_health_check = 0  # a restarted Redis lost the health-check key: write it now

    # -- the loop -------------------------------------------------------------------------

    async def _poll_iteration(self) -> None:
        self.last_iteration = time.monotonic()
        JOBS_RUNNING.set(self.job_counter)
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
        """Until a wake-up, or the fallback poll delay (in burst mode, one of its jobs ending,
        or BURST_POLL_S)."""
        wait = BURST_POLL_S if self.burst else self._idle_poll_s
        if wait <= 0:
            return
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(wait):
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
        await self._sample_queue()

    async def _sample_queue(self) -> None:
        """The scaling figures (docs/operations.md, "Scaling"), at most every few seconds."""
        if time.monotonic() - self._queue_sampled < self.queue_sample_s:
            return
        self._queue_sampled = time.monotonic()
        if self._queue_script is None:
            self._queue_script = self.pool.register_script(_DUE)
        now = timestamp_ms()
        due, oldest = await self._queue_script(
            args=[self.queue_name, now, in_progress_key_prefix, OLDEST_SCAN_LIMIT]
        )
        JOBS_DUE.set(int(due))
        OLDEST_DUE.set(max(0.0, (now - float(oldest)) / 1000) if oldest else 0.0)

    # -- wake-ups -------------------------------------------------------------------------

    def _listen(self) -> None:
        if self.burst or self._idle_poll_s <= 0:
            return
        if self._listener is None:
            log.info(
                "worker polling",
                extra={"max_jobs": self.max_jobs, "fallback_poll_s": self._idle_poll_s},
            )
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
        """Claim as many of ``job_ids`` as there are free slots in one atomic call, and run
        them. ARQ claims one id at a time with WATCH/EXISTS/ZSCORE/MULTI (four round trips),
        even for jobs this or another worker is running: most of a busy worker's Redis
        traffic, and a tenth of its CPU with three workers on one queue."""
        free = self.max_jobs - self.job_counter
        candidates = [raw.decode() for raw in job_ids]
        candidates = [job_id for job_id in candidates if not self._running_here(job_id)]
        if free <= 0 or not candidates:
            return
        ttl_ms = int(self.in_progress_timeout_s * 1000)
        now = timestamp_ms()
        claimed = await self._claim_jobs(
            args=[self.queue_name, now, in_progress_key_prefix, ttl_ms, free, *candidates]
        )
        for raw_id, raw_score in zip(claimed[::2], claimed[1::2], strict=True):
            await self.sem.acquire()  # never waits: at most ``free`` jobs were claimed
            self.job_counter += 1
            job_id = raw_id.decode()
            task = self.loop.create_task(self.run_job(job_id, int(float(raw_score))))
            task.add_done_callback(self._job_done)
            self.tasks[job_id] = task

    def _running_here(self, job_id: str) -> bool:
        task = self.tasks.get(job_id)
        return task is not None and not task.done()

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

    # -- draining -------------------------------------------------------------------------

    def drain(self) -> None:
        """SIGTERM: stop claiming, let running jobs finish within ``drain_grace_s``, hand the
        rest back to the queue at once, then end the loop. A second call cuts the grace short."""
        if self._draining is None:
            self._draining = self.loop.create_task(self._drain(), name="arq-drain")
        else:
            self._cut_short.set()

    @property
    def draining(self) -> bool:
        return self._draining is not None

    async def _drain(self) -> None:
        self.allow_pick_jobs = False
        DRAINING.set(1)
        log.info(
            "worker draining: no new jobs",
            extra={"running": len(self._running()), "grace_s": self.drain_grace_s},
        )
        await self._settle(self.drain_grace_s, until_cut=True)
        released = await self._release_running()
        if released:
            with contextlib.suppress(*REDIS_FAILURES):  # a poll finds them all the same
                await self.pool.publish(wake_channel(self.pool, self.queue_name), len(released))
        log.info(
            "worker drained",
            extra={"completed": self.jobs_complete, "released": len(released)},
        )
        if self.main_task is not None:
            self.main_task.cancel()

    def _running(self) -> list[asyncio.Task[Any]]:
        return [task for task in self.tasks.values() if not task.done()]

    async def _settle(self, within: float, *, until_cut: bool = False) -> None:
        """Until no job runs, ``within`` seconds pass, or (``until_cut``) a second signal."""
        deadline = time.monotonic() + within
        while (running := self._running()) and (left := deadline - time.monotonic()) > 0:
            if until_cut and self._cut_short.is_set():
                return
            cut = asyncio.ensure_future(self._cut_short.wait())
            await asyncio.wait([*running, cut], timeout=left, return_when=FIRST_COMPLETED)
            cut.cancel()

    async def _release_running(self) -> list[str]:
        """Cancel each job still running. ARQ treats a cancelled job as one to run again: it
        stays queued, due, and its in-progress key is deleted, so another worker claims it now
        rather than when the claim would lapse (the longest job timeout + 10 s)."""
        released: list[str] = []
        deadline = time.monotonic() + RELEASE_WAIT_S
        while self._running() and time.monotonic() < deadline:
            for job_id, task in list(self.job_tasks.items()):
                if not task.done() and job_id not in released:
                    task.cancel()
                    released.append(job_id)
            await self._settle(min(0.1, deadline - time.monotonic()))
        RELEASED.inc(len(released))
        self.released += released
        return released

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
