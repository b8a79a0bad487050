"""The turn reads its context before the message's log row commits: the message is placed
among the last 20 as the log will hold it (pure, no database)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from app.channel.store import CONTEXT_SIZE, LoggedMessage, as_logged
from app.frames.events import Event, MessageCreate, parse_dispatch
from app.turn.pipeline import with_message
from tests.support.frames import message_create

START = datetime(2026, 12, 6, 12, 0, tzinfo=UTC)


def _message(message_id: int, minute: int, content: str = "hello") -> MessageCreate:
    frame = message_create(
        content=content, message_id=message_id, timestamp=START + timedelta(minutes=minute)
    )
    event = parse_dispatch(frame)
    assert isinstance(event, Event) and isinstance(event.data, MessageCreate)
    return event.data


def _logged(count: int) -> list[LoggedMessage]:
    return [as_logged(_message(100 + k, k, f"earlier {k}")) for k in range(count)]


def test_a_message_read_before_its_commit_closes_the_last_twenty() -> None:
    recent = _logged(CONTEXT_SIZE)
    message = _message(999, CONTEXT_SIZE, "the new one")

    placed = with_message(recent, message)

    assert len(placed) == CONTEXT_SIZE
    assert placed[-1] == as_logged(message)
    assert [m.id for m in placed[:-1]] == [m.id for m in recent[1:]]  # the oldest drops out


def test_a_message_said_before_one_already_logged_goes_in_by_when_it_was_said() -> None:
    recent = _logged(3)  # minutes 0, 1, 2
    message = _message(999, 1, "said at minute one, logged late")

    placed = with_message(recent, message)

    assert [m.id for m in placed] == [100, 101, 999, 102]


def test_a_message_already_logged_is_not_placed_twice() -> None:
    message = _message(999, 5)
    recent = [*_logged(3), as_logged(message)]

    assert with_message(recent, message) == recent
