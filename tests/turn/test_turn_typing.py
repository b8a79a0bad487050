""" "Bot is typing…" end to end: POST /webhook → real worker → the Discord fake's typing route.
From the moment the turn knows it will write (the emoji alone is not enough) until the reply
is posted, renewed by the worker; never for an emoji-only turn, a command or a refused turn;
never a delay."""

from __future__ import annotations

import asyncio
import itertools

import pytest
from pytest import MonkeyPatch

from app.chat.fake import Delay, Text
from app.config import Settings
from app.db import SessionFactory
from app.decision.vocabulary import Question
from app.directory.store import Rules
from app.frames.events import MessageCreate
from app.turn.pipeline import Writing
from app.turn.typing import RENEW_EVERY_S
from app.wiring import open_services
from tests.support.frames import message_create
from tests.support.stack import BOT_ID, Stack, running_stack, task_agent_settings

MENTION = f"<@{BOT_ID}>"
CHANNEL = 300
DISCORD_INDICATOR_S = 10.0  # how long Discord shows one typing call


def moments(stack: Stack) -> tuple[float, list[float], float]:
    """When the reaction, each typing call and the reply reached Discord."""
    [reaction] = stack.discord.calls_to("PUT", f"/channels/{CHANNEL}/messages/")
    [post] = stack.discord.calls_to("POST", f"/channels/{CHANNEL}/messages")
    return reaction.at, [c.at for c in stack.discord.typing_in(CHANNEL)], post.at


@pytest.mark.timeout(60)
async def test_a_14_second_reply_is_covered_by_renewed_typing_until_it_is_posted(
    stack: Stack,
) -> None:
    stack.model.push(Delay(14.0, Text("That took a while, sorry!")))
    await stack.deliver(message_create(content=f"{MENTION} write me a poem"))

    reacted, typing, posted = moments(stack)
    assert typing, "no typing indicator at all"
    assert typing[0] - reacted < 2.0  # within a second or two of the reaction
    gaps = [later - earlier for earlier, later in itertools.pairwise(typing)]
    assert len(typing) >= 2 and all(gap <= 8.0 for gap in gaps), gaps
    assert all(at < posted for at in typing)  # none after the reply: it would show again
    assert posted - typing[-1] < DISCORD_INDICATOR_S  # still showing when the reply lands
    assert RENEW_EVERY_S <= 8.0
    assert [m["content"] for m in stack.replies()] == ["That took a while, sorry!"]


async def test_a_failing_or_hanging_typing_call_never_delays_the_reply(stack: Stack) -> None:
    stack.discord.delay_next(f"POST /channels/{CHANNEL}/typing", 30.0)
    await stack.deliver(message_create(content=f"{MENTION} quick one"))
    reacted, _, posted = moments(stack)
    assert posted - reacted < 3.0  # not held by the typing call the fake sits on

    stack.discord.clear()
    stack.discord.fail_next(f"POST /channels/{CHANNEL}/typing", 500, count=5)
    await stack.deliver(message_create(content=f"{MENTION} and another"))
    assert [m["content"] for m in stack.replies()] == ["Hello from the model!"]


async def test_no_typing_for_an_emoji_only_turn_a_command_or_an_unaddressed_message(
    stack: Stack,
) -> None:
    stack.jev.answers[Question.EMOJI_ENOUGH] = True
    await stack.deliver(
        message_create(content=f"{MENTION} thanks!"),
        message_create(content="!memory show"),
        message_create(content="just chatting"),
    )
    assert stack.discord.reactions  # the emoji turn happened
    assert stack.discord.typing_in(CHANNEL) == []


async def test_typing_shows_while_jev_decides_whether_the_message_is_a_task(
    settings: Settings, sessions: SessionFactory, redis: object, monkeypatch: MonkeyPatch
) -> None:
    """Once the emoji answers say the turn will write, "typing…" goes out beside the is_task
    question rather than after its answer (the reply's path does not carry it), and still
    after the reaction: the reaction stays the first acknowledgement."""
    latency = 0.5
    async with task_agent_settings() as agent, running_stack(settings, monkeypatch, **agent) as st:
        st.jev.latency = latency
        await st.deliver(message_create(content=f"{MENTION} what should I cook tonight?"))
        [emoji_asked] = st.jev.asked_at(Question.EMOJI_CHOICE)
        [task_asked] = st.jev.asked_at(Question.IS_TASK)
        reacted, typing, posted = moments(st)
    assert typing, "no typing indicator at all"
    assert emoji_asked + latency <= typing[0], "typing before the turn knew it would write"
    assert reacted < typing[0], "the reaction is the first acknowledgement, typing follows"
    assert typing[0] < task_asked + latency, "typing waited for the is_task answer"
    assert all(at < posted for at in typing)


def typing_tasks() -> list[asyncio.Task[object]]:
    return [t for t in asyncio.all_tasks() if t.get_name().startswith("typing:")]


async def test_a_writer_the_turn_closed_starts_no_typing_afterwards(stack: Stack) -> None:
    """A step that ends after its turn failed (the reaction's PUT landing late, say) cannot
    start "typing…" again: closing the writer ends it for good, so no renewal loop outlives
    the turn."""
    frame = message_create(content=f"{MENTION} hello")
    message = MessageCreate.model_validate(frame["d"])
    async with open_services(stack.settings) as services:
        writer = Writing(services, message, Rules())
        writer.start()
        assert len(typing_tasks()) == 1
        await writer.close()
        assert typing_tasks() == []
        writer.start()
        writer.read_ahead()
        assert typing_tasks() == []
        await writer.close()  # closing twice is harmless
