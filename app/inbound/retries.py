"""When a failed event job is tried again, and when it is given up (dead-lettered).

Pure: the inbox records the next attempt's time from this schedule; nothing here does I/O."""

from __future__ import annotations

from datetime import timedelta

# Pause after failed attempt n (1-based): seconds for a blip, minutes for an outage. Seven
# pauses, eight attempts; the last attempt starts at least 33 min 40 s after the first failed
# (10 s + 30 s + 1 + 2 + 5 + 10 + 15 min), so an outage of up to half an hour loses nothing.
RETRY_DELAYS = (
    timedelta(seconds=10),
    timedelta(seconds=30),
    timedelta(minutes=1),
    timedelta(minutes=2),
    timedelta(minutes=5),
    timedelta(minutes=10),
    timedelta(minutes=15),
)
MAX_ATTEMPTS = len(RETRY_DELAYS) + 1

# A job that never reports back (worker killed, job timeout) on its last attempt is given up
# at the next claim; this is how long that claim waits, just past the 100 s job timeout.
LAST_ATTEMPT_LEASE = timedelta(minutes=2)


def retry_delay(attempt: int) -> timedelta | None:
    """The pause before the next attempt after attempt ``attempt`` failed; None: give up."""
    if attempt < 1:
        raise ValueError("attempts count from 1")
    return RETRY_DELAYS[attempt - 1] if attempt <= len(RETRY_DELAYS) else None
