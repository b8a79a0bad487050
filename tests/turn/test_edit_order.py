"""Edits apply in Discord's order (their ``edited_timestamp``), through the real webhook and
worker: an older edit delivered after a newer one never brings back the words its author
edited away, neither in the channel log, nor as an observation, nor in the next prompt."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

from sqlalchemy import select

from app.db import SessionFactory
from app.models.messages import Message
from app.models.structured import Observation
from tests.support.frames import message_create, message_delete, message_update, next_id
from tests.support.stack import BOT_ID, Stack

T0 = datetime.now(UTC) - timedelta(minutes=10)
FIRST, SECOND = "meet at the old station", "meet at the new library"


async def logged(sessions: SessionFactory, message_id: int) -> tuple[str, list[str]]:
    """The message's logged text and the texts of its edit observations."""
    async with sessions() as session:
        row = await session.get(Message, message_id)
        edits = await session.scalars(
            select(Observation.content).where(
                Observation.message_id == message_id, Observation.kind == "edit"
            )
        )
        assert row is not None
        return row.content, list(edits)


def edit(message_id: int, content: str, minutes: int) -> dict[str, object]:
    return message_update(
        message_id=message_id, content=content, edited_at=T0 + timedelta(minutes=minutes)
    )


async def test_an_older_edit_delivered_late_changes_nothing(
    stack: Stack, sessions: SessionFactory
) -> None:
    said = message_create(content="meet somewhere", timestamp=T0)
    mid = int(said["d"]["id"])
    await stack.deliver(said)
    await stack.deliver(edit(mid, SECOND, 2))  # the newer edit arrives first
    await stack.deliver(edit(mid, FIRST, 1))

    assert await logged(sessions, mid) == (SECOND, [SECOND])
    asking = message_create(content=f"<@{BOT_ID}> where do we meet?", author_id=2002)
    await stack.deliver(asking)
    prompt = json.dumps(stack.model.requests[-1]["messages"])
    assert SECOND in prompt and FIRST not in prompt


async def test_edits_that_arrive_before_their_message_keep_the_newest(
    stack: Stack, sessions: SessionFactory
) -> None:
    mid = next_id()
    await stack.deliver(edit(mid, SECOND, 2), edit(mid, FIRST, 1))
    await stack.deliver(message_create(content="meet somewhere", message_id=mid, timestamp=T0))

    text, _ = await logged(sessions, mid)
    assert text == SECOND


async def test_a_mention_deleted_before_it_arrived_reaches_no_model(stack: Stack) -> None:
    """The turn reads whether a delete came first before it asks anything: the deleted
    words never reach the decision service or the chat model, and nothing answers them."""
    mid = next_id()
    words = "my secret plan is the lighthouse"
    await stack.deliver(message_delete(message_id=mid))
    await stack.deliver(message_create(content=f"<@{BOT_ID}> {words}", message_id=mid))

    assert not [body for body in stack.jev.requests if words in json.dumps(body)]
    assert not [body for body in stack.model.requests if words in json.dumps(body)]
    assert stack.replies() == []


async def test_a_mention_edited_before_it_arrived_is_asked_about_as_edited(stack: Stack) -> None:
    """An edit that came first: every question and the reply's prompt carry the newest
    text, never the words edited away."""
    mid = next_id()
    await stack.deliver(edit(mid, f"<@{BOT_ID}> {SECOND}", 2))
    await stack.deliver(
        message_create(content=f"<@{BOT_ID}> {FIRST}", message_id=mid, timestamp=T0)
    )

    asked = [json.dumps(body) for body in stack.jev.requests]
    assert asked and all(FIRST not in body for body in asked)
    assert any(SECOND in body for body in asked)
    prompt = json.dumps(stack.model.requests[-1]["messages"])
    assert SECOND in prompt and FIRST not in prompt
