"""The turn end to end: POST /webhook → real worker → fakes of Discord, Jev and Anthropic."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest
from sqlalchemy import func, select, update

from app.chat.fake import Delay, Failure, Text
from app.config import Settings
from app.db import SessionFactory
from app.decision.vocabulary import Question
from app.frames.events import MessageCreate
from app.kit.attribution import read_lines
from app.models.inbox import InboxEvent
from app.models.memory import MemoryLog
from app.models.messages import Message
from app.models.signals import Signal
from app.turn.events import handle_event
from app.wiring import open_services
from tests.support.frames import message_create, reaction_add
from tests.support.providers import BOTH_PROVIDERS
from tests.support.stack import BOT_ID, Stack, running_stack
from tests.support.waiting import wait_until
from tests.support.worker import drain

pytestmark = BOTH_PROVIDERS

MENTION = f"<@{BOT_ID}>"


@pytest.fixture
async def stack(
    settings: Settings, sessions: SessionFactory, redis: object, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[Stack]:
    async with running_stack(settings, monkeypatch) as running:
        yield running


async def count(sessions: SessionFactory, model: type, *where: object) -> int:
    async with sessions() as session:
        query = select(func.count()).select_from(model).where(*where)  # type: ignore[arg-type]
        return int(await session.scalar(query) or 0)


async def test_unaddressed_message_is_logged_and_nothing_else(
    stack: Stack, sessions: SessionFactory
) -> None:
    frame = message_create(content="just chatting")
    await stack.deliver(frame)
    async with sessions() as session:
        logged = await session.get(Message, int(frame["d"]["id"]))
    assert logged is not None and logged.content == "just chatting" and not logged.is_bot
    assert stack.discord.calls == []
    assert stack.jev.requests == []
    assert stack.model.requests == []


async def test_addressed_message_reacts_first_then_replies_to_the_trigger(
    stack: Stack, sessions: SessionFactory
) -> None:
    stack.jev.answers[Question.EMOJI_CHOICE] = "🎉"
    frame = message_create(content=f"{MENTION} guess what, I got the job!")
    await stack.deliver(frame)

    kinds = [(c.method, c.path.split("/")[-1]) for c in stack.discord.calls]
    reaction_at = kinds.index(("PUT", "@me"))
    post_at = kinds.index(("POST", "messages"))
    assert reaction_at < post_at
    assert stack.discord.reactions_on(int(frame["d"]["id"])) == ["🎉"]
    [reply] = stack.replies()
    assert reply["content"] == "Hello from the model!"
    assert reply["message_reference"]["message_id"] == frame["d"]["id"]
    # The model saw the persona last and the speaker's words as their own attributed line.
    [request] = stack.model.requests
    assert "You are Tsumugi" in request["system"][-1]["text"]
    [said] = read_lines(request["messages"][-1]["content"])
    assert said == {"from": "Alice", "text": f"{MENTION} guess what, I got the job!"}
    async with sessions() as session:
        stored = await session.get(Message, int(reply["id"]))
    assert stored is not None and stored.is_bot and stored.content == "Hello from the model!"
    assert stored.reply_to_id == int(frame["d"]["id"])


async def test_emoji_alone_ends_the_turn_without_generation(
    stack: Stack, sessions: SessionFactory
) -> None:
    stack.jev.answers[Question.EMOJI_ENOUGH] = True
    stack.jev.answers[Question.EMOJI_CHOICE] = "❤️"
    frame = message_create(content=f"{MENTION} thanks!!")
    await stack.deliver(frame)
    assert stack.discord.reactions_on(int(frame["d"]["id"])) == ["❤️"]
    assert stack.replies() == []
    assert stack.model.requests == []
    assert stack.jev.asked(Question.IS_TASK) == []


async def test_decision_service_down_takes_the_conservative_branch(
    stack: Stack, sessions: SessionFactory
) -> None:
    stack.jev.down = True
    frame = message_create(content=f"{MENTION} I love green tea, remember that")
    await stack.deliver(frame)
    assert stack.discord.reactions_on(int(frame["d"]["id"])) == ["👍"]
    assert [r["content"] for r in stack.replies()] == ["Hello from the model!"]
    # The memory job ran (worth_keeping was asked) and, without an answer, read and wrote
    # nothing: the only ledger row is the reply prompt's own read.
    assert stack.jev.asked(Question.WORTH_KEEPING)
    async with sessions() as session:
        ledger = (await session.execute(select(MemoryLog.actor, MemoryLog.action))).all()
    assert [tuple(row) for row in ledger] == [("reply", "read")]
    assert len(stack.model.requests) == 1


async def test_correction_is_a_signal_and_no_reply(stack: Stack, sessions: SessionFactory) -> None:
    bot_message = message_create(content="Paris is in Italy.", author_id=BOT_ID, bot=True)
    async with sessions() as session, session.begin():
        session.add(
            Message(
                id=int(bot_message["d"]["id"]),
                channel_id=300,
                author_id=BOT_ID,
                author_name="companion",
                is_bot=True,
                content="Paris is in Italy.",
                created_at=MessageCreate.model_validate(bot_message["d"]).timestamp,
            )
        )
    stack.jev.answers[Question.IS_CORRECTION] = True
    correction = message_create(content="No, Paris is in France.", reply_to=bot_message["d"])
    await stack.deliver(correction)
    async with sessions() as session:
        signal = await session.scalar(select(Signal))
    assert signal is not None
    assert (signal.kind, signal.value) == ("correction", "No, Paris is in France.")
    assert signal.message_id == int(bot_message["d"]["id"])
    assert stack.replies() == [] and stack.discord.reactions == []


async def test_correction_of_a_bot_message_known_only_from_the_quote(
    stack: Stack, sessions: SessionFactory
) -> None:
    # A bot message from before this deployment: not in our log, but quoted by Discord.
    bot_message = message_create(content="2 + 2 = 5", author_id=BOT_ID, bot=True)
    stack.jev.answers[Question.IS_CORRECTION] = lambda body: "2 + 2 = 5" in body["prompt"]
    await stack.deliver(message_create(content="It's 4.", reply_to=bot_message["d"]))
    async with sessions() as session:
        values = (await session.scalars(select(Signal.value))).all()
    assert values == ["It's 4."]


async def test_reaction_signals_only_others_on_bot_messages_and_replay_safe(
    stack: Stack, sessions: SessionFactory
) -> None:
    bot_msg = stack.discord.seed_message(300, "a bot message", author_id=BOT_ID)
    human_msg = 424242
    await stack.deliver(
        reaction_add(message_id=bot_msg, user_id=2001, emoji="😂", message_author_id=BOT_ID),
        reaction_add(message_id=bot_msg, user_id=BOT_ID, emoji="👍", message_author_id=BOT_ID),
        reaction_add(message_id=human_msg, user_id=2001, emoji="🎉", message_author_id=2002),
        reaction_add(message_id=bot_msg, user_id=2002, emoji="blob", emoji_id=99),
    )
    # The last one has no message_author_id: the bot message is unknown locally → no signal.
    replay = reaction_add(message_id=bot_msg, user_id=2001, emoji="😂", message_author_id=BOT_ID)
    assert (await stack.post(replay)) == {"status": "duplicate"}
    async with sessions() as session:
        values = (await session.scalars(select(Signal.value))).all()
    assert values == ["😂"]


async def test_reaction_on_a_logged_bot_message_without_author_hint(
    stack: Stack, sessions: SessionFactory
) -> None:
    frame = message_create(content=f"{MENTION} hi")
    await stack.deliver(frame)
    [reply] = stack.replies()
    await stack.deliver(
        reaction_add(message_id=int(reply["id"]), user_id=2002, emoji="blob", emoji_id=99)
    )
    async with sessions() as session:
        signal = await session.scalar(select(Signal))
    assert signal is not None and signal.value == "blob:99" and signal.user_id == 2002


async def test_long_reply_is_posted_in_parts_and_logged(
    stack: Stack, sessions: SessionFactory
) -> None:
    paragraph = ("word " * 180).strip()  # ~900 characters
    stack.model.default = Text("\n\n".join([paragraph] * 5))  # ~4,500 characters
    frame = message_create(content=f"{MENTION} tell me everything")
    await stack.deliver(frame)
    parts = stack.replies()
    assert len(parts) == 3
    assert all(len(p["content"]) <= 2000 for p in parts)
    assert parts[0].get("message_reference") and not parts[1].get("message_reference")
    assert await count(sessions, Message, Message.is_bot.is_(True)) == 3


async def test_the_same_event_processed_twice_replies_once(
    stack: Stack, sessions: SessionFactory
) -> None:
    frame = message_create(content=f"{MENTION} once please")
    await stack.deliver(frame)
    event_id = frame["d"]["id"]
    # Forget that the inbox row was handled, as if the job's last commit had been lost.
    async with sessions() as session, session.begin():
        await session.execute(
            update(InboxEvent).where(InboxEvent.id == event_id).values(handled_at=None)
        )
    async with open_services(stack.settings) as services:
        await handle_event(services, event_id)
    assert len(stack.replies()) == 1
    assert len(stack.discord.reactions) == 1
    assert len(stack.model.requests) == 1


async def test_turn_killed_between_reaction_and_reply_replies_once_on_retry(
    stack: Stack, sessions: SessionFactory
) -> None:
    stack.model.push(Delay(30, Text("the reply that never was")))
    frame = message_create(content=f"{MENTION} are you there?")
    await stack.post(frame)
    event_id = frame["d"]["id"]
    async with open_services(stack.settings) as services:
        turn = asyncio.create_task(handle_event(services, event_id))
        await wait_until(lambda: bool(stack.model.requests), within=10, what="the model call")
        assert len(stack.discord.reactions) == 1 and stack.replies() == []
        turn.cancel()  # the worker dies mid-generation
        await asyncio.gather(turn, return_exceptions=True)
        await handle_event(services, event_id)  # the retry
    [reply] = stack.replies()
    assert reply["content"] == "Hello from the model!"
    assert len(stack.discord.reactions) == 1


async def test_post_accepted_but_response_lost_does_not_post_twice(
    stack: Stack, sessions: SessionFactory
) -> None:
    stack.discord.fail_next("POST /channels/300/messages", 500, after=True, count=4)
    frame = message_create(content=f"{MENTION} hello?")
    await stack.post(frame)
    await drain(stack.settings)  # the job fails: Discord looked down
    assert len(stack.replies()) == 1
    async with open_services(stack.settings) as services:
        await handle_event(services, frame["d"]["id"])  # the retry (sweeper or ARQ)
    assert len(stack.replies()) == 1
    assert await count(sessions, Message, Message.is_bot.is_(True)) == 1


async def test_a_refused_chat_request_posts_a_marked_apology_and_no_memory_job(
    stack: Stack, sessions: SessionFactory
) -> None:
    # A 400 is no outage: retrying would be refused again, so the apology goes out now.
    # (An outage waits for the event's retries: test_inbox_retries.)
    stack.model.default = Failure(400)
    stack.jev.answers[Question.WORTH_KEEPING] = 1.0
    frame = message_create(content=f"{MENTION} hello")
    await stack.deliver(frame)
    [reply] = stack.replies()
    assert reply["content"].startswith("Sorry")
    assert stack.jev.asked(Question.WORTH_KEEPING) == []


async def test_dm_is_addressed_without_a_mention(stack: Stack) -> None:
    frame = message_create(content="hi in private", guild_id=None, channel_id=777)
    await stack.deliver(frame)
    assert [r["channel_id"] for r in stack.replies()] == ["777"]


async def test_reply_to_the_bot_without_mention_is_not_addressed(
    stack: Stack, sessions: SessionFactory
) -> None:
    bot_msg = message_create(content="What's up?", author_id=BOT_ID, bot=True)
    frame = message_create(content="not much", reply_to=bot_msg["d"])
    frame["d"]["mentions"] = [bot_msg["d"]["author"]]  # the reply's implicit ping
    await stack.deliver(frame)
    assert stack.replies() == [] and stack.discord.reactions == []


async def test_unknown_memory_subcommand_answers_with_usage(stack: Stack) -> None:
    await stack.deliver(message_create(content="!memory frobnicate"))
    [answer] = stack.replies()
    assert answer["content"].startswith("Usage:")
    assert stack.model.requests == [] and stack.jev.requests == []
