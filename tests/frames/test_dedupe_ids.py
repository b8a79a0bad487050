"""De-duplication ids (pure): messages by their own id; events without one (reactions, bulk
deletes) by their place in the gateway session when the relay sent it, else by content."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from app.frames.events import Event, FrameError, parse_dispatch
from tests.support.frames import (
    Frame,
    frame,
    message_create,
    message_delete,
    message_delete_bulk,
    message_update,
    reaction_add,
    reaction_remove,
    reaction_remove_all,
    reaction_remove_emoji,
    thread_create,
)

SESSION = "3f1a9c0e7b2d4c58a6e0f19b2d3c4e5f"
EDITED = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)


def at(body: Frame, s: object = 7) -> dict[str, Any]:
    """``body`` as dispatch number ``s`` (anything a relay might send, valid or not)."""
    return {**body, "s": s}


def dedupe(body: dict[str, Any], session: str | None = SESSION) -> str:
    event = parse_dispatch(body, session)
    assert isinstance(event, Event)
    return event.dedupe_id


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        (at(reaction_add(message_id=3, user_id=5)), f"reaction-add@{SESSION}:7"),
        (at(reaction_remove(message_id=3, user_id=5)), f"reaction-remove@{SESSION}:7"),
        (at(reaction_remove_all(message_id=3)), f"reaction-clear@{SESSION}:7"),
        (at(reaction_remove_emoji(message_id=3, emoji="👍")), f"reaction-clear-emoji@{SESSION}:7"),
        (message_delete_bulk(message_ids=[8, 9], channel_id=2), f"delete-bulk@{SESSION}:44"),
        # Messages keep their own ids, session or not.
        (message_create(content="hi", message_id=123), "123"),
        (message_delete(message_id=123, channel_id=2), "delete:123"),
        (
            message_update(message_id=123, channel_id=2, content="hi", edited_at=EDITED),
            "update:123:2026-01-02T03:04:05+00:00",
        ),
    ],
)
def test_ids_with_a_gateway_session(body: dict[str, Any], expected: str) -> None:
    assert dedupe(body) == expected


@pytest.mark.parametrize(
    ("session", "s"),
    [
        (None, 7),  # no header: an older relay
        (SESSION, None),  # no sequence in the frame
        (SESSION, "7"),
        (SESSION, True),
        (SESSION, -1),
        ("", 7),
        ("x" * 129, 7),
        ("bad\nsession", 7),
        ("séance", 7),
    ],
)
def test_without_a_usable_session_and_sequence_the_id_comes_from_the_content(
    session: str | None, s: object
) -> None:
    body = at(reaction_add(message_id=3, user_id=5), s)
    assert dedupe(body, session) == "reaction:3:5:👍:add"


def test_a_resume_replays_the_same_id_and_a_re_add_gets_a_new_one() -> None:
    added = reaction_add(message_id=3, user_id=5)
    resumed = dict(added)
    re_added = {**added, "s": added["s"] + 2}
    assert dedupe(added) == dedupe(resumed)
    assert dedupe(added) != dedupe(re_added)
    assert dedupe(added) != dedupe(added, session="another-session-id")
    # Without a session the re-add cannot be told from a replay: the content is the same.
    assert dedupe(added, None) == dedupe(re_added, None)


THREAD = thread_create(thread_id=77, parent_id=300, name="plans")["d"]


def test_a_thread_is_created_once_whatever_the_session() -> None:
    created = frame("THREAD_CREATE", THREAD)
    assert dedupe(created) == dedupe(created, None) == "thread-create:77"
    assert dedupe({**created, "s": 99}, "another-session-id") == "thread-create:77"


def test_a_thread_update_is_keyed_by_its_place_or_else_by_what_it_says() -> None:
    updated = frame("THREAD_UPDATE", THREAD)
    assert dedupe(updated) == f"thread-update@{SESSION}:44"
    moved = frame("THREAD_UPDATE", {**THREAD, "parent_id": "301"})
    assert dedupe(updated, None).startswith("thread-update:77:")
    assert dedupe(updated, None) != dedupe(moved, None)


@pytest.mark.parametrize("missing", ["id", "parent_id"])
def test_a_thread_event_without_its_ids_is_refused(missing: str) -> None:
    d = {k: v for k, v in THREAD.items() if k != missing}
    with pytest.raises(FrameError) as refused:
        parse_dispatch(frame("THREAD_CREATE", d))
    assert refused.value.problems[0]["field"] == f"d.{missing}"
