"""The learning rule, decided once (app.consent.store.Learning), holds on every path through
the real webhook and worker: with memory off nothing is observed, extracted, consolidated or
learned at night; for a person who paused, none of their messages, edits or reactions is
observed and no fact about them appears, while others are learned about as usual."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import text

from app.config import Settings
from app.db import SessionFactory
from app.decision.vocabulary import Question
from app.kit.attribution import read_lines
from tests.support.frames import message_update, reaction_add
from tests.support.stack import BOT_ID
from tests.support.trust_env import ALICE, BOB, CHANNEL_A, GUILD_A, World, tonight, trust_world


async def scalar(sessions: SessionFactory, sql: str, **params: Any) -> Any:
    async with sessions() as session:
        return await session.scalar(text(sql), params)


async def her_activity(world: World, marker: str) -> None:
    """She tells the bot something, edits it, and reacts to the bot's answer."""
    told = await world.tell(ALICE, f"I keep {marker} bees on the roof")
    edit = message_update(
        message_id=int(told["d"]["id"]),
        channel_id=CHANNEL_A,
        guild_id=GUILD_A,
        author_id=ALICE,
        content=f"<@{BOT_ID}> I keep {marker} bees, two hives",
    )
    answer = world.stack.discord.messages_in(CHANNEL_A)[-1]
    await world.stack.deliver(
        edit,
        reaction_add(message_id=int(answer["id"]), user_id=ALICE, message_author_id=BOT_ID),
    )


async def test_with_memory_off_nothing_is_observed_extracted_consolidated_or_learned(
    settings: Settings, sessions: SessionFactory, redis: object, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with trust_world(
        settings, monkeypatch, memory_enabled=False, memory_consolidate_every=2
    ) as world:
        await her_activity(world, "alpine-1187")
        await world.tell(BOB, "I collect stamps from Peru")
        run = await tonight(world)

        assert world.stack.discord.messages_in(CHANNEL_A)  # the bot still replies
        assert await scalar(sessions, "SELECT count(*) FROM observations") == 0
        assert await scalar(sessions, "SELECT count(*) FROM episodes") == 0
        assert await scalar(sessions, "SELECT count(*) FROM memories") == 0
        assert world.stack.jev.asked(Question.WORTH_KEEPING) == []
        assert run["summary"]["added"] == []


async def test_a_paused_person_is_never_observed_and_no_fact_about_them_appears(
    settings: Settings, sessions: SessionFactory, redis: object, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with trust_world(settings, monkeypatch, memory_consolidate_every=3) as world:
        await world.tell(ALICE, "!memory pause", mention=False)
        await her_activity(world, "alpine-2291")
        await world.tell(BOB, "I collect stamps from Peru")
        await world.tell(BOB, "and coins from Chile")
        run = await tonight(world)

        hers = await scalar(
            sessions, "SELECT count(*) FROM observations WHERE user_id = :u", u=ALICE
        )
        answers_to_her = await scalar(
            sessions,
            "SELECT count(*) FROM observations o JOIN messages m ON m.id = o.message_id "
            "WHERE o.kind = 'bot_message' AND m.reply_to_id IN "
            "(SELECT id FROM messages WHERE author_id = :u)",
            u=ALICE,
        )
        assert hers == 0 and answers_to_her == 0
        # Never the speaker of a write path (her lines may be context in Bob's, as any line).
        worth = world.stack.jev.asked(Question.WORTH_KEEPING)
        speakers = {
            line["from"] for b in worth for line in read_lines(b["prompt"]) if line.get("speaker")
        }
        assert worth and "Alice" not in speakers and "Bob" in speakers
        count = "SELECT count(*) FROM {} WHERE {}"
        assert await scalar(sessions, count.format("memories", "user_id = :u"), u=ALICE) == 0
        in_episodes = count.format("episodes", ":u = ANY(source_user_ids)")
        assert await scalar(sessions, in_episodes, u=ALICE) == 0
        # Bob is learned about as usual, by the reply path and the night.
        assert await scalar(sessions, "SELECT count(*) FROM memories WHERE user_id = :u", u=BOB)
        assert await scalar(sessions, "SELECT count(*) FROM observations WHERE user_id = :u", u=BOB)
        assert run["status"] == "finished" and GUILD_A
