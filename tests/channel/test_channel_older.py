"""Older-conversation recall in the channel log, on real Postgres: only this channel's live
messages from before the context window that share a telling word with the message, oldest
first; never what was written while its author paused learning, nor the bot's reply to it;
an edited text is found by what it says now."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from sqlalchemy import text

from app.channel import store as channel_log
from app.channel.store import LoggedMessage
from app.db import SessionFactory, unit_of_work
from app.frames.events import MessageCreate, MessageUpdate
from app.kit.relevance import Query
from tests.support.frames import message_create, next_id

CHANNEL, OTHER = 300, 301
START = datetime(2026, 5, 1, tzinfo=UTC)


async def say(
    sessions: SessionFactory,
    content: str,
    *,
    days: float,
    channel: int = CHANNEL,
    recallable: bool = True,
) -> int:
    frame = message_create(
        content=content,
        channel_id=channel,
        message_id=next_id(),
        timestamp=START + timedelta(days=days),
    )
    async with unit_of_work(sessions) as session:
        await channel_log.log_message(
            session, MessageCreate.model_validate(frame["d"]), recallable=recallable
        )
    return int(frame["d"]["id"])


async def window(sessions: SessionFactory) -> LoggedMessage:
    """The oldest of the channel's last 20 (20 lines of small talk said last)."""
    for n in range(20):
        await say(sessions, f"small talk {n}", days=100 + n / 100)
    async with sessions() as session:
        return (await channel_log.recent_messages(session, CHANNEL))[0]


async def older(sessions: SessionFactory, before: LoggedMessage, words: str) -> list[str]:
    async with unit_of_work(sessions) as session:
        found = await channel_log.older_relevant(
            session, CHANNEL, before=before, query=Query.of([(words, 1.0)]), limit=10
        )
    return [m.content for m in found]


async def test_only_this_channels_live_older_messages_oldest_first(
    sessions: SessionFactory,
) -> None:
    await say(sessions, "Miso chased a moth", days=3)
    await say(sessions, "Miso is my goldfish", days=4, channel=OTHER)
    gone = await say(sessions, "Miso broke a vase", days=5)
    await say(sessions, "Miso slept all day", days=6)
    await say(sessions, "the weather was grey", days=7)
    async with unit_of_work(sessions) as session:
        await channel_log.mark_deleted(session, [gone], START, channel_id=CHANNEL)
    before = await window(sessions)
    await say(sessions, "Miso is in the recent window", days=101)

    assert await older(sessions, before, "how is Miso?") == [
        "Miso chased a moth",
        "Miso slept all day",
    ]
    assert await older(sessions, before, "any news?") == []


async def test_what_was_said_while_paused_and_the_bots_reply_to_it_stay_out(
    sessions: SessionFactory,
) -> None:
    paused = await say(sessions, "Miso has a vet visit", days=3, recallable=False)
    async with unit_of_work(sessions) as session:
        await channel_log.log_bot_message(
            session,
            message_id=next_id(),
            channel_id=CHANNEL,
            guild_id=500,
            bot_user_id=1000,
            bot_name="companion",
            content="Good luck to Miso at the vet!",
            reply_to_id=paused,
            created_at=START + timedelta(days=3.1),
        )
    await say(sessions, "Miso loves the vet's treats", days=4)
    before = await window(sessions)

    assert await older(sessions, before, "Miso vet") == ["Miso loves the vet's treats"]


async def test_an_edited_or_rewritten_text_is_found_by_what_it_says_now(
    sessions: SessionFactory,
) -> None:
    edited = await say(sessions, "my kayak is blue", days=3)
    rewritten = await say(sessions, "see you at the lighthouse", days=4)
    async with unit_of_work(sessions) as session:
        update = MessageUpdate(id=edited, channel_id=CHANNEL, content="my canoe is blue")
        await channel_log.apply_edit(session, update, START)
        await session.execute(
            text("UPDATE messages SET content = 'see you at the pier' WHERE id = :id"),
            {"id": rewritten},
        )
    before = await window(sessions)

    assert await older(sessions, before, "kayak lighthouse") == []
    assert await older(sessions, before, "canoe pier") == [
        "my canoe is blue",
        "see you at the pier",
    ]
