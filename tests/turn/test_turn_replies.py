"""Reply chains end to end: the replied-to message (and up to four more hops) reaches the
prompt, marked as the message being answered, from the log or fetched once from Discord,
under the same origin and erasure rules as any context line."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from sqlalchemy import select

from app.config import Settings
from app.consent import store as consent
from app.db import SessionFactory, unit_of_work
from app.decision.vocabulary import Question
from app.kit.attribution import read_lines
from app.models.messages import Message
from tests.support.frames import message_create, message_delete
from tests.support.stack import BOT_ID, Stack, running_stack, task_agent_settings

MENTION = f"<@{BOT_ID}>"
CHANNEL = 300
BOB = 2002
START = datetime(2026, 11, 1, 9, 0, tzinfo=UTC)


@pytest.fixture
async def stack(
    settings: Settings, sessions: SessionFactory, redis: object, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[Stack]:
    # No channel consolidation here: the only model call is the reply.
    async with running_stack(settings, monkeypatch, memory_consolidate_every=1000) as running:
        yield running


def answering_block(stack: Stack) -> str | None:
    """The reply prompt's reply-chain block, if it has one."""
    request = stack.model.requests[0]
    blocks = [b["text"] for b in request["system"] if b["text"].startswith("The newest message")]
    return blocks[0] if blocks else None


def chain_lines(stack: Stack) -> list[dict[str, Any]]:
    """The chain's messages as the block renders them, oldest first: the last one is the
    message being answered."""
    block = answering_block(stack)
    assert block is None or "The message it answers (the last line)" in block
    return read_lines(block) if block else []


def at(minutes: int) -> datetime:
    return START + timedelta(minutes=minutes)


async def test_a_reply_to_a_message_25_back_carries_it_into_the_prompt(stack: Stack) -> None:
    old = message_create(
        content="The key is under the blue pot.", author_id=BOB, author_name="bob", timestamp=at(0)
    )
    filler = [message_create(content=f"chatter {i}", timestamp=at(i + 1)) for i in range(25)]
    await stack.deliver(old, *filler)
    reply = message_create(
        content=f"{MENTION} where did Bob say the key was?", reply_to=old["d"], timestamp=at(30)
    )
    await stack.deliver(reply)

    [request] = stack.model.requests
    conversation = str(request["messages"])
    assert "blue pot" not in conversation  # outside the last 20 messages
    assert chain_lines(stack) == [{"from": "Bob", "text": "The key is under the blue pot."}]
    assert request["system"][-1]["text"].startswith("## Core")  # the persona stays last
    assert stack.discord.calls_to("GET", f"/channels/{CHANNEL}/messages/") == []  # from the log


async def test_a_message_the_log_never_saw_is_fetched_once_with_its_chain(
    stack: Stack, sessions: SessionFactory
) -> None:
    question = stack.discord.seed_message(CHANNEL, "Where shall we eat?", author_id=BOB)
    answer = stack.discord.seed_message(
        CHANNEL, "Ramen, surely.", author_id=2003, username="carol", reply_to=question
    )
    await stack.deliver(
        message_create(content=f"{MENTION} is that a good idea?", reply_to_id=answer)
    )

    assert chain_lines(stack) == [
        {"from": "user", "text": "Where shall we eat?"},
        {"from": "carol", "text": "Ramen, surely."},
    ]
    async with sessions() as session:
        logged = (await session.scalars(select(Message.content).where(Message.id == answer))).one()
    assert logged == "Ramen, surely."  # from now on a context line like any other

    stack.model.requests.clear()
    await stack.deliver(message_create(content=f"{MENTION} and after?", reply_to_id=answer))
    assert len(chain_lines(stack)) == 2
    fetched = stack.discord.calls_to("GET", f"/channels/{CHANNEL}/messages/")
    assert sorted(c.path.rsplit("/", 1)[1] for c in fetched) == sorted(
        [str(question), str(answer)]
    )  # each asked once, over both turns


async def test_the_chain_is_fetched_while_jev_decides_whether_the_message_is_a_task(
    settings: Settings, sessions: SessionFactory, redis: object, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The reply chain is read for whichever path writes, so once the emoji answers say the
    turn writes it goes out beside the is_task question, not after its answer."""
    latency = 0.5
    async with (
        task_agent_settings() as agent,
        running_stack(settings, monkeypatch, memory_consolidate_every=1000, **agent) as st,
    ):
        st.jev.latency = latency
        answer = st.discord.seed_message(CHANNEL, "Ramen, surely.", author_id=BOB, username="bob")
        await st.deliver(
            message_create(content=f"{MENTION} is that a good idea?", reply_to_id=answer)
        )
        [fetched] = st.discord.calls_to("GET", f"/channels/{CHANNEL}/messages/{answer}")
        [emoji_asked] = st.jev.asked_at(Question.EMOJI_CHOICE)
        [task_asked] = st.jev.asked_at(Question.IS_TASK)
        lines = chain_lines(st)
    assert lines == [{"from": "bob", "text": "Ramen, surely."}]
    assert emoji_asked + latency <= fetched.at, "fetched before the turn knew it would write"
    assert fetched.at < task_asked + latency, "the chain waited for the is_task answer"


@pytest.mark.parametrize("failure", ["missing", "forbidden"])
async def test_a_replied_to_message_discord_will_not_give_is_skipped_quietly(
    stack: Stack, failure: str
) -> None:
    if failure == "forbidden":
        stack.discord.fail_next(f"GET /channels/{CHANNEL}/messages/", 403, code=50001)
    await stack.deliver(message_create(content=f"{MENTION} what about this?", reply_to_id=424242))
    assert answering_block(stack) is None
    assert [m["content"] for m in stack.replies()] == ["Hello from the model!"]


async def test_a_reply_chain_never_crosses_into_another_channel(stack: Stack) -> None:
    elsewhere = stack.discord.seed_message(301, "staff-only plans", author_id=BOB)
    logged_elsewhere = message_create(content="secret over there", channel_id=302)
    await stack.deliver(logged_elsewhere)
    cross = message_create(content=f"{MENTION} hm?", reply_to_id=elsewhere)
    cross["d"]["message_reference"]["channel_id"] = "301"
    # A reference claiming this channel for a message the log has in another one.
    lying = message_create(content=f"{MENTION} and?", reply_to_id=int(logged_elsewhere["d"]["id"]))
    await stack.deliver(cross)
    await stack.deliver(lying)

    assert all("The newest message" not in str(r["system"]) for r in stack.model.requests)
    assert stack.discord.calls_to("GET", "/channels/301/") == []
    assert "secret over there" not in str(stack.model.requests)


async def test_a_deleted_message_and_a_paused_authors_unlogged_message_are_not_carried(
    stack: Stack, sessions: SessionFactory
) -> None:
    gone = message_create(content="I take that back", author_id=BOB, author_name="bob")
    await stack.deliver(gone)
    await stack.deliver(message_delete(message_id=int(gone["d"]["id"]), channel_id=CHANNEL))
    # Discord still quotes it in the frame; the log says it is gone.
    await stack.deliver(message_create(content=f"{MENTION} what was it?", reply_to=gone["d"]))
    assert answering_block(stack) is None

    async with unit_of_work(sessions) as session:
        await consent.pause(session, 2009)  # as !forgetme leaves an erased person
    theirs = stack.discord.seed_message(CHANNEL, "words of an erased person", author_id=2009)
    stack.model.requests.clear()
    await stack.deliver(message_create(content=f"{MENTION} remember this?", reply_to_id=theirs))
    assert answering_block(stack) is None
    async with sessions() as session:
        assert await session.get(Message, theirs) is None


async def test_a_long_chain_stops_after_five_messages(stack: Stack) -> None:
    previous: int | None = None
    ids: list[int] = []
    for hop in range(7):
        previous = stack.discord.seed_message(
            CHANNEL, f"hop {hop}", author_id=BOB, reply_to=previous
        )
        ids.append(previous)
    await stack.deliver(message_create(content=f"{MENTION} summary?", reply_to_id=ids[-1]))
    lines = chain_lines(stack)
    assert [line["text"] for line in lines] == ["hop 2", "hop 3", "hop 4", "hop 5", "hop 6"]


async def test_a_forwarded_message_is_not_a_reply(stack: Stack) -> None:
    original = stack.discord.seed_message(CHANNEL, "forwarded words", author_id=BOB)
    forward = message_create(content=f"{MENTION} look at this", reply_to_id=original)
    forward["d"]["message_reference"]["type"] = 1  # FORWARD: Discord sends a snapshot instead
    await stack.deliver(forward)
    assert answering_block(stack) is None
    assert stack.discord.calls_to("GET", f"/channels/{CHANNEL}/messages/") == []
