"""A channel's chat model end to end (webhook → worker → the fake model): staff choose one of
CHAT_MODELS with `!bot channel model` (or the admin API); the reply and the task agent in that
channel use it, other channels keep CHAT_MODEL; members and unlisted models are refused."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import pytest

from app.chat.fake import Reply, Text, ToolUse
from app.commands.authority import Refusal
from app.config import Settings
from app.db import SessionFactory
from app.decision.vocabulary import Question
from tests.support.frames import message_create
from tests.support.providers import BOTH_PROVIDERS
from tests.support.slash import CHANNEL as SLASH_CHANNEL
from tests.support.slash import GUILD as SLASH_GUILD
from tests.support.slash import slash_world
from tests.support.stack import BOT_ID, Stack, running_stack, task_agent_settings

pytestmark = BOTH_PROVIDERS

MENTION = f"<@{BOT_ID}>"
GENERAL, HELP = 300, 301
SAM, ALICE = 2099, 2001  # staff, a member
ADMIN = {"Authorization": "Bearer test-admin-secret-8c2e4a6f1d3b5907"}
ALLOWED = ["small-model", "big-model"]


@pytest.fixture
async def stack(
    settings: Settings, sessions: SessionFactory, redis: object, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[Stack]:
    async with (
        task_agent_settings() as agent,
        running_stack(
            settings,
            monkeypatch,
            staff_user_ids=[SAM],
            chat_models=ALLOWED,
            memory_consolidate_every=1000,
            **agent,
        ) as running,
    ):
        yield running


def said(text: str, author: int = ALICE, channel_id: int = GENERAL) -> dict[str, Any]:
    name = "sam" if author == SAM else "alice"
    return message_create(content=text, author_id=author, author_name=name, channel_id=channel_id)


def models_asked(stack: Stack) -> list[str]:
    return [str(body["model"]) for body in stack.model.requests]


async def test_a_channels_model_serves_its_replies_and_tasks_only(
    stack: Stack, settings: Settings
) -> None:
    await stack.deliver(said("!bot channel model small-model", SAM))
    assert "chat model (set here): `small-model`" in stack.discord.texts_in(GENERAL)[-1]

    await stack.deliver(said(f"{MENTION} hi"))
    await stack.deliver(said(f"{MENTION} hi there", channel_id=HELP))
    stack.jev.answers[Question.IS_TASK] = True
    agent: Iterator[Reply] = iter([ToolUse("web_search", {"query": "x"}), Text("Found it.")])
    stack.model.responder = lambda body: next(agent) if "tools" in body else Text("reply")
    await stack.deliver(said(f"{MENTION} look this up"))
    assert models_asked(stack) == ["small-model", settings.chat_model, "small-model", "small-model"]

    await stack.deliver(said("!bot channel model clear", SAM))
    stack.jev.answers[Question.IS_TASK] = False
    await stack.deliver(said(f"{MENTION} and now?"))
    assert models_asked(stack)[-1] == settings.chat_model
    assert "chat model" not in stack.discord.texts_in(GENERAL)[-2]  # the default again


async def test_members_and_unlisted_models_are_refused_and_nothing_changes(
    stack: Stack, settings: Settings
) -> None:
    await stack.deliver(said("!bot channel model small-model"))  # Alice is no staff
    await stack.deliver(said("!bot channel model gpt-unlisted", SAM))
    texts = stack.discord.texts_in(GENERAL)
    assert texts[0] == "Sorry, only staff can use the bot's staff commands."
    assert "`gpt-unlisted` is not one of the chat models allowed here" in texts[1]

    await stack.deliver(said(f"{MENTION} hi"))
    assert models_asked(stack) == [settings.chat_model]


async def test_the_admin_api_reads_and_sets_the_channels_model(stack: Stack) -> None:
    async with httpx.AsyncClient(base_url=stack.api, headers=ADMIN) as admin:
        refused = await admin.put(f"/channels/{GENERAL}/settings", json={"model": "unlisted"})
        put = await admin.put(f"/channels/{GENERAL}/settings", json={"model": "big-model"})
        got = (await admin.get(f"/channels/{GENERAL}/settings")).json()
        cleared = await admin.put(f"/channels/{GENERAL}/settings", json={"model": None})

    assert refused.status_code == 400
    assert put.status_code == 200 and put.json()["model"] == "big-model"
    assert (got["model"], got["own"]["model"], got["mode"]) == ("big-model", "big-model", "mention")
    assert cleared.json()["model"] is None


async def test_the_slash_command_is_the_same_command_with_the_same_authority(
    stack: Stack,
) -> None:
    async with slash_world(stack) as slash:
        member = await slash.use("/bot channel model", {"name": "small-model"}, user=ALICE)
        [refused] = await slash.answer_of(member)
        unlisted = await slash.use("/bot channel model", {"name": "gpt-unlisted"}, user=SAM)
        [not_allowed] = await slash.answer_of(unlisted)
        chosen = await slash.use("/bot channel model", {"name": "small-model"}, user=SAM)
        [done] = await slash.answer_of(chosen)

    assert refused["content"] == Refusal.NOT_STAFF
    assert "`gpt-unlisted` is not one of the chat models allowed here" in not_allowed["content"]
    assert "chat model (set here): `small-model`" in done["content"]
    await stack.deliver(
        message_create(content=f"{MENTION} hi", channel_id=SLASH_CHANNEL, guild_id=SLASH_GUILD)
    )
    assert models_asked(stack) == ["small-model"]
