"""Every part of ARQ beyond its documented API that our worker (``app.kit.arqworker``) and
queue (``app.kit.arqueue``) rely on, why, and a fingerprint of the installed code.

``tests/kit/test_arq_internals.py`` fails when an installed ARQ differs from these fingerprints:
re-read the named code, adapt the module that relies on it, then update the fingerprint
(``python -m app.kit.arqinternals`` prints the current ones). The same test fails when either
module imports or overrides something of ARQ's that is not listed here."""

from __future__ import annotations

import hashlib
import importlib
import inspect
import sys
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Internal:
    name: str  # dotted path from the package: module, then attributes
    why: str
    fingerprint: str  # sha256 (first 16 hex digits) of its source, or of a constant's repr


ARQ_INTERNALS: tuple[Internal, ...] = (
    # -- the worker: app.kit.arqworker.ResilientWorker subclasses arq.worker.Worker --------
    Internal(
        "arq.worker.Worker.__init__",
        "the attributes the subclass reads and sets: poll_delay_s, pool/_pool, queue_name, "
        "burst, max_jobs, job_counter, sem, tasks, job_tasks, loop, ctx, in_progress_timeout_s, "
        "cron_jobs, _last_health_check, on_shutdown, allow_pick_jobs, main_task, retry_jobs",
        "edfb0cd7e05e77cf",
    ),
    Internal(
        "arq.worker.Worker.main",
        "start-up order (the pool passed in is used as is, ctx['redis'] set, on_startup run) "
        "and the loop that calls _poll_iteration; our wake-up wait replaces its poll sleep",
        "45ca1591c9717466",
    ),
    Internal(
        "arq.worker.Worker.async_run",
        "runs main() as main_task, which the drain cancels to end the loop",
        "f3434c3dd359b31b",
    ),
    Internal(
        "arq.worker.Worker._poll_iteration",
        "overridden to back off on Redis errors; its own body reads due ids (only while "
        "allow_pick_jobs, which the drain clears), calls start_jobs, reaps tasks, heart_beat",
        "f8d39d823a0a59f2",
    ),
    Internal(
        "arq.worker.Worker.start_jobs",
        "replaced by one atomic claim script for many ids; the claim must stay ARQ's: "
        "no in-progress key and a score at or before now, then PSETEX the in-progress key "
        "for in_progress_timeout_s, and one run_job task per claim counted in job_counter/sem",
        "b45797cfa40bed7f",
    ),
    Internal(
        "arq.worker.Worker._release_sem_dec_counter_on_complete",
        "the done-callback's bookkeeping, called from ours before it wakes the loop",
        "0ed101482e942c33",
    ),
    Internal(
        "arq.worker.Worker.run_job",
        "wrapped to release a claim whose job could not be read (Redis down); the drain "
        "cancels job_tasks[id] and relies on its CancelledError branch (retry_jobs): the job "
        "stays queued and finish_job(finish=False) deletes its in-progress key",
        "589a19059ff84ee7",
    ),
    Internal(
        "arq.worker.Worker.finish_job",
        "retried until Redis answers (its positional signature is passed through); with "
        "finish=False and keep_in_progress=None it deletes the in-progress key: the release",
        "903f09c92830d3fd",
    ),
    Internal(
        "arq.worker.Worker.finish_failed_job",
        "retried until Redis answers",
        "3e16087f318a7acf",
    ),
    Internal(
        "arq.worker.Worker.heart_beat",
        "overridden: record_health then run_cron, with cron next_run put back on failure",
        "2e9959bea66dc551",
    ),
    Internal(
        "arq.worker.Worker.record_health",
        "called from our heart_beat; writes the health-check key the tests and bench wait on",
        "108f4b8686c9402d",
    ),
    Internal(
        "arq.worker.Worker.run_cron",
        "called from our heart_beat with ARQ's window; moves CronJob.next_run before enqueueing",
        "7d2d3784e6567fb2",
    ),
    Internal(
        "arq.worker.Worker.handle_sig",
        "close() calls it (handle_signals=False): cancels what still runs and main_task",
        "985ff7ba01aa8f04",
    ),
    Internal(
        "arq.worker.Worker.close",
        "overridden so a Redis failure while deleting the health key still runs on_shutdown",
        "5bcc9cb356680829",
    ),
    Internal(
        "arq.cron.CronJob",
        "next_run, read and restored by heart_beat when an enqueue fails",
        "03a1899789166ec5",
    ),
    Internal(
        "arq.constants.in_progress_key_prefix",
        "the claim's key: the claim script, the release of an unread job, the queue metrics",
        "bd5688547c0752ab",
    ),
    Internal(
        "arq.utils.timestamp_ms",
        "the queue's scores are milliseconds since the epoch (claims, due-job metrics)",
        "fb714827206ab4ab",
    ),
    # -- the queue: app.kit.arqueue writes ARQ's job records itself ---------------------------
    Internal(
        "arq.connections.ArqRedis.__init__",
        "job_serializer / job_deserializer attributes, set after building the client",
        "2e8bd7e180d895c8",
    ),
    Internal(
        "arq.connections.ArqRedis.enqueue_job",
        "the single enqueue; the batch script copies what it writes (job key PSETEX with "
        "expires_extra_ms, ZADD score = enqueue time) and its refusal of an id already queued",
        "7da8706a747c1171",
    ),
    Internal(
        "arq.jobs.serialize_job",
        "the job record the batch enqueue writes: {t, f, a, k, et} through our serializer",
        "1fc854cc50e16e5c",
    ),
    Internal(
        "arq.jobs.deserialize_job_raw",
        "reads that record back in run_job: the fields must stay the ones serialize_job writes",
        "f330dfaff8e2160f",
    ),
    Internal(
        "arq.constants.default_queue_name",
        "the sorted set the batch enqueue, the wake-up channel and the metrics use",
        "db7f982e0306911a",
    ),
    Internal(
        "arq.constants.job_key_prefix",
        "where the batch enqueue writes each job record",
        "229e97f4bc5ff95f",
    ),
    Internal(
        "arq.constants.expires_extra_ms",
        "the job record's lifetime the batch enqueue gives, as enqueue_job does",
        "619d6a33617fad34",
    ),
)


def resolve(name: str) -> object:
    """The object a dotted name points at: the longest importable module, then attributes."""
    parts = name.split(".")
    for split in range(len(parts), 0, -1):
        try:
            target: object = importlib.import_module(".".join(parts[:split]))
        except ImportError:
            continue
        for attribute in parts[split:]:
            target = getattr(target, attribute)
        return target
    raise ImportError(name)


def fingerprint(target: object) -> str:
    if inspect.isroutine(target) or inspect.isclass(target):
        text = inspect.getsource(target)
    else:
        text = repr(target)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def drifted(internals: tuple[Internal, ...] = ARQ_INTERNALS) -> dict[str, str]:
    """Internals whose installed code differs from the fingerprint: name -> what it is now."""
    changed = {}
    for internal in internals:
        try:
            now = fingerprint(resolve(internal.name))
        except (ImportError, AttributeError, OSError, TypeError) as exc:
            now = f"gone ({type(exc).__name__})"
        if now != internal.fingerprint:
            changed[internal.name] = now
    return changed


if __name__ == "__main__":
    for internal in ARQ_INTERNALS:
        print(f"{internal.name}: {fingerprint(resolve(internal.name))}", file=sys.stdout)
