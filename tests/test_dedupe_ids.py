"""De-duplication ids (pure): messages by their own id; events without one (reactions, bulk
deletes) by their place in the gateway session when the relay sent it, else by content."""

from __future__ import annotations

from typing import Any

import pytest

from app.frames.events import Event, FrameError, parse_dispatch
from tests.support.frames import frame, message_create, reaction_add

SESSION = "3f1a9c0e7b2d4c58a6e0f19b2d3c4e5f"


def reaction(t: str, s: object = 7, **extra: Any) -> dict[str, Any]:
    d = {"user_id": "5", "channel_id": "2", "message_id": "3", "emoji": {"name": "👍", "id": None}}
    return {"op": 0, "t": t, "s": s, "d": {**d, **extra}}


def dedupe(body: dict[str, Any], session: str | None = SESSION) -> str:
    event = parse_dispatch(body, session)
    assert isinstance(event, Event)
    return event.dedupe_id


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        (reaction("MESSAGE_REACTION_ADD"), f"reaction-add@{SESSION}:7"),
        (reaction("MESSAGE_REACTION_REMOVE"), f"reaction-remove@{SESSION}:7"),
        (reaction("MESSAGE_REACTION_REMOVE_ALL"), f"reaction-clear@{SESSION}:7"),
        (reaction("MESSAGE_REACTION_REMOVE_EMOJI"), f"reaction-clear-emoji@{SESSION}:7"),
        (
            frame("MESSAGE_DELETE_BULK", {"ids": ["8", "9"], "channel_id": "2"}),
            f"delete-bulk@{SESSION}:44",
        ),
        # Messages keep their own ids, session or not.
        (message_create(content="hi", message_id=123), "123"),
        (frame("MESSAGE_DELETE", {"id": "123", "channel_id": "2"}), "delete:123"),
        (
            frame(
                "MESSAGE_UPDATE",
                {"id": "123", "channel_id": "2", "edited_timestamp": "2026-01-02T03:04:05+00:00"},
            ),
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
    body = reaction("MESSAGE_REACTION_ADD", s=s)
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


THREAD = {"id": "77", "parent_id": "300", "guild_id": "500", "name": "plans", "type": 11}


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
