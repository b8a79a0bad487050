"""Channel modes, a channel's persona and threads, end to end through the webhook and the
worker: `mention` (the default), `free` and `off`, set by staff (`!bot channel …`) or the
admin API, followed by threads unless they set their own; DMS_ENABLED=false."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from sqlalchemy import select

from app.config import Settings
from app.db import SessionFactory
from app.decision.vocabulary import Question
from app.models.messages import Message
from app.models.structured import Observation
from app.turn.pipeline import DMS_OFF
from tests.support.frames import GUILD_ID, message_create, thread_create
from tests.support.stack import BOT_ID, Stack, running_stack

MENTION = f"<@{BOT_ID}>"
GENERAL, HELP = 300, 301
LOOKUP_S = 1.0  # how long Discord takes to answer a lookup, where a test slows it
SAM = 2099  # staff
ADMIN = {"Authorization": "Bearer test-admin-secret-8c2e4a6f1d3b5907"}


@pytest.fixture
async def stack(
    settings: Settings, sessions: SessionFactory, redis: object, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[Stack]:
    async with running_stack(
        settings, monkeypatch, staff_user_ids=[SAM], memory_consolidate_every=1000
    ) as running:
        yield running


def staff(command: str, channel_id: int = GENERAL) -> dict[str, Any]:
    return message_create(content=command, author_id=SAM, author_name="sam", channel_id=channel_id)


def said(channel_id: int, text: str, **kw: Any) -> dict[str, Any]:
    return message_create(content=text, channel_id=channel_id, **kw)


def bot_texts(stack: Stack, channel_id: int) -> list[str]:
    return stack.discord.texts_in(channel_id)


def reply_prompts(stack: Stack) -> list[str]:
    """The persona block of each reply the model wrote."""
    return [r["system"][-1]["text"] for r in stack.model.requests]


async def test_free_makes_every_message_addressed_and_the_emoji_branch_still_applies(
    stack: Stack,
) -> None:
    stack.jev.answers[Question.EMOJI_ENOUGH] = lambda body: "nice" in body["prompt"]
    await stack.deliver(staff("!bot channel mode free"))
    assert "Mode `free` (set here)" in bot_texts(stack, GENERAL)[-1]

    got_job, nice = said(GENERAL, "I got the job!"), said(GENERAL, "nice")
    await stack.deliver(got_job)
    await stack.deliver(nice)
    assert stack.discord.reactions_on(int(got_job["d"]["id"])) == ["👍"]
    assert stack.discord.reactions_on(int(nice["d"]["id"])) == ["👍"]
    replies = [m for m in stack.replies() if m["message_reference"]]
    answered = [m["message_reference"]["message_id"] for m in replies[1:]]
    assert answered == [got_job["d"]["id"]]  # "nice" got the reaction alone
    # Another channel keeps the seed's rule: not addressed, nothing happens.
    await stack.deliver(said(HELP, "I got the job too!"))
    assert bot_texts(stack, HELP) == [] and len(stack.discord.reactions) == 2


async def test_off_means_no_reply_reaction_or_typing_while_log_and_commands_go_on(
    stack: Stack, sessions: SessionFactory
) -> None:
    await stack.deliver(staff("!bot channel mode off"))
    stack.discord.clear()
    quiet = said(GENERAL, f"{MENTION} are you there?")
    await stack.deliver(quiet)
    assert stack.discord.calls_to("PUT") == [] and stack.discord.typing_in(GENERAL) == []
    assert stack.discord.posted == [] and stack.model.requests == []
    assert stack.jev.asked(Question.EMOJI_CHOICE) == []
    async with sessions() as session:
        assert await session.get(Message, int(quiet["d"]["id"])) is not None
        kinds = (await session.scalars(select(Observation.kind))).all()
    assert "message" in kinds

    await stack.deliver(said(GENERAL, "!memory show"))
    assert stack.discord.posted, "a command is still answered in an off channel"
    await stack.deliver(staff("!bot channel mode mention"))
    await stack.deliver(said(GENERAL, f"{MENTION} now?"))
    assert bot_texts(stack, GENERAL)[-1] == "Hello from the model!"


async def test_non_staff_cannot_change_a_channel(stack: Stack) -> None:
    await stack.deliver(said(GENERAL, "!bot channel mode off"))
    await stack.deliver(said(GENERAL, "!bot channel persona Talk like a pirate."))
    assert bot_texts(stack, GENERAL) == ["Sorry, only staff can use the bot's staff commands."] * 2
    async with httpx.AsyncClient(base_url=stack.api, headers=ADMIN) as admin:
        current = (await admin.get(f"/channels/{GENERAL}/settings")).json()
    assert (current["mode"], current["persona"]) == ("mention", None)
    await stack.deliver(said(GENERAL, f"{MENTION} hi"))
    assert bot_texts(stack, GENERAL)[-1] == "Hello from the model!"


async def test_a_thread_under_an_off_channel_stays_quiet_unless_it_is_set_itself(
    stack: Stack,
) -> None:
    await stack.deliver(staff("!bot channel mode off"))
    stack.discord.clear()
    await stack.deliver(thread_create(thread_id=777, parent_id=GENERAL))
    await stack.deliver(said(777, f"{MENTION} hello in the thread"))
    # A thread whose THREAD_CREATE never came: Discord is asked once where it hangs.
    stack.discord.add_thread(778, parent_id=GENERAL, guild_id=GUILD_ID)
    await stack.deliver(said(778, f"{MENTION} and here?"))
    await stack.deliver(said(778, f"{MENTION} still nothing?"))
    assert stack.discord.posted == [] and stack.discord.reactions == []
    assert len(stack.discord.calls_to("GET", "/channels/778")) == 1
    assert stack.discord.calls_to("GET", "/channels/777") == []

    await stack.deliver(staff("!bot channel mode mention", channel_id=777))
    await stack.deliver(said(777, f"{MENTION} and now?"))
    assert bot_texts(stack, 777)[-1] == "Hello from the model!"


async def test_a_channel_persona_reaches_that_channels_prompts_only_after_the_core(
    stack: Stack,
) -> None:
    await stack.deliver(staff("!bot channel persona Be formal and precise here.", HELP))
    await stack.deliver(staff("!bot pin channel Office hours are on Fridays.", HELP))
    assert "persona (set here): Be formal and precise here." in bot_texts(stack, HELP)[0]
    await stack.deliver(said(HELP, f"{MENTION} a question"))
    await stack.deliver(said(GENERAL, f"{MENTION} a question"))
    await stack.deliver(thread_create(thread_id=779, parent_id=HELP))
    await stack.deliver(said(779, f"{MENTION} a question in the thread"))

    in_help, in_general, in_thread = reply_prompts(stack)
    for persona in (in_help, in_thread):
        addition = persona.index("In this channel, the operators add:\nBe formal and precise")
        assert persona.index("## Core") < persona.index("## Style") < addition
        assert persona.split("## Style")[0].count("Be formal") == 0  # the core is untouched
    assert "Be formal" not in in_general
    thread_memory = stack.model.requests[2]["system"][0]["text"]
    assert "Office hours are on Fridays." in thread_memory  # the parent's pins follow too


async def test_a_mention_in_a_thread_not_yet_placed_is_asked_about_while_discord_is(
    stack: Stack,
) -> None:
    await stack.deliver(staff("!bot channel persona Be formal and precise here.", HELP))
    await stack.deliver(staff("!bot pin channel Office hours are on Fridays.", HELP))
    # A thread whose THREAD_CREATE never came, under a channel with a persona and a pin (no
    # channel is off): Discord is slow to say where it hangs.
    stack.discord.add_thread(780, parent_id=HELP, guild_id=GUILD_ID)
    stack.discord.delay_next("GET /channels/780", LOOKUP_S)
    await stack.deliver(said(780, f"{MENTION} a question in the thread"))

    (lookup,) = stack.discord.calls_to("GET", "/channels/780")
    for question in (Question.EMOJI_ENOUGH, Question.EMOJI_CHOICE):
        (asked,) = stack.jev.asked_at(question)
        assert asked < lookup.at + LOOKUP_S  # out before Discord answered
    # What the lookup found is in place before the reply: the parent's persona and pins.
    thread_prompt = reply_prompts(stack)[-1]
    assert "In this channel, the operators add:\nBe formal and precise" in thread_prompt
    assert "Office hours are on Fridays." in stack.model.requests[-1]["system"][0]["text"]
    assert bot_texts(stack, 780) == ["Hello from the model!"]


async def test_a_persona_over_500_characters_is_refused_and_changes_nothing(
    stack: Stack,
) -> None:
    await stack.deliver(staff("!bot channel persona " + "x" * 501))
    assert bot_texts(stack, GENERAL) == [
        "Not changed: a channel persona is at most 500 characters."
    ]
    await stack.deliver(staff("!bot channel persona clear"))
    await stack.deliver(staff("!bot channel mode loud"))
    assert "no channel persona" in bot_texts(stack, GENERAL)[1]
    assert bot_texts(stack, GENERAL)[2].startswith("Usage: ")


async def test_the_admin_api_reads_and_sets_the_same_settings(stack: Stack) -> None:
    async with httpx.AsyncClient(base_url=stack.api) as http:
        assert (await http.get(f"/channels/{HELP}/settings")).status_code == 401
        put = await http.put(
            f"/channels/{HELP}/settings",
            json={"mode": "free", "persona": "Be brief."},
            headers=ADMIN,
        )
        assert put.status_code == 200, put.text
        assert put.json() == {
            "channelId": str(HELP),
            "mode": "free",
            "persona": "Be brief.",
            "parentId": None,
            "model": None,
            "own": {"mode": "free", "persona": "Be brief.", "model": None},
        }
        for bad in ({"mode": "loud"}, {"persona": "x" * 501}, {"volume": 3}, {"persona": ""}):
            refused = await http.put(f"/channels/{HELP}/settings", json=bad, headers=ADMIN)
            assert refused.status_code == 422, bad
        await stack.deliver(thread_create(thread_id=780, parent_id=HELP))
        thread = (await http.get("/channels/780/settings", headers=ADMIN)).json()
        assert (thread["mode"], thread["persona"], thread["parentId"]) == (
            "free",
            "Be brief.",
            str(HELP),
        )
        assert thread["own"] == {"mode": None, "persona": None, "model": None}
        kept = await http.put(f"/channels/{HELP}/settings", json={"mode": None}, headers=ADMIN)
        assert (kept.json()["mode"], kept.json()["persona"]) == ("mention", "Be brief.")

    await stack.deliver(said(HELP, f"{MENTION} hi"))
    assert "Be brief." in reply_prompts(stack)[-1]


async def test_with_dms_disabled_dm_conversation_gets_one_notice_a_day_and_commands_work(
    settings: Settings, sessions: SessionFactory, redis: object, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with running_stack(settings, monkeypatch, dms_enabled=False) as stack:
        stack.discord.dm_channels[2001] = 900  # Alice's DM channel with the bot

        def dm(content: str) -> dict[str, Any]:
            return message_create(content=content, channel_id=900, guild_id=None)

        await stack.deliver(dm("hello?"))
        await stack.deliver(dm("anyone?"))
        assert stack.discord.texts_in(900) == [DMS_OFF]
        assert stack.model.requests == [] and stack.discord.reactions == []
        assert stack.discord.typing_in(900) == []

        await stack.deliver(dm("!memory show"))
        assert "I don't have any memories about you." in stack.discord.texts_in(900)
        await stack.deliver(dm("!forgetme"))
        assert stack.discord.texts_in(900)[-1].startswith("Done: I erased what I had from you")
