"""The retry schedule and the task agent's time budget: pure functions, plain data."""

from __future__ import annotations

from datetime import timedelta

import pytest

from app.inbound.retries import MAX_ATTEMPTS, RETRY_DELAYS, retry_delay
from app.turn.pipeline import FALLBACK_MARGIN_S, task_budget

S, M = timedelta(seconds=1), timedelta(minutes=1)


def test_retries_back_off_from_seconds_to_minutes_then_give_up() -> None:
    pauses = [retry_delay(attempt) for attempt in range(1, MAX_ATTEMPTS + 2)]
    assert pauses == [10 * S, 30 * S, 1 * M, 2 * M, 5 * M, 10 * M, 15 * M, None, None]
    assert MAX_ATTEMPTS == 8


def test_a_fifteen_minute_outage_is_outlasted_with_room_to_spare() -> None:
    # Attempt k starts at least the sum of the pauses before it after the first one.
    pauses = [retry_delay(n) or timedelta() for n in range(1, MAX_ATTEMPTS)]
    starts = [sum(pauses[: k - 1], timedelta()) for k in range(1, MAX_ATTEMPTS + 1)]
    assert starts[-1] == sum(RETRY_DELAYS, timedelta()) == 33 * M + 40 * S
    # The first attempt after a 15-minute outage is the 7th (18 min 40 s); one more is left.
    first_after = next(k for k, start in enumerate(starts, 1) if start >= 15 * M)
    assert (first_after, starts[first_after - 1]) == (7, 18 * M + 40 * S)
    assert first_after < MAX_ATTEMPTS
    assert starts[-1] >= 2 * (15 * M)


def test_attempts_count_from_one() -> None:
    with pytest.raises(ValueError):
        retry_delay(0)


@pytest.mark.parametrize(
    ("deadline", "now", "chat_timeout", "expected"),
    [
        (None, 5.0, 60.0, None),  # outside a job: the agent's own cap
        (100.0, 0.0, 60.0, 100 - 60 - FALLBACK_MARGIN_S),
        (100.0, 12.5, 60.0, 100 - 12.5 - 60 - FALLBACK_MARGIN_S),
        (100.0, 0.0, 95.0, 100 - 95 - FALLBACK_MARGIN_S),  # nothing left: negative
    ],
)
def test_the_task_budget_leaves_the_written_reply_and_the_post_their_time(
    deadline: float | None, now: float, chat_timeout: float, expected: float | None
) -> None:
    assert task_budget(deadline, now, chat_timeout) == expected
