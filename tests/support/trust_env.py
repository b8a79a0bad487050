"""The whole stack for the privacy tests: people talk in two guilds and in DMs through the
real webhook and worker; the fake model writes each memory from the speaker's own words, so
a test can follow a marker text from where it was said to every prompt it reaches."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass
from typing import Any

import httpx
import pytest

from app.chat.fake import Text
from app.config import Settings
from app.decision.vocabulary import Question
from app.kit.attribution import read_lines
from app.kit.tls import httpx_tls
from tests.support.frames import message_create, next_id
from tests.support.stack import BOT_ID, Stack, running_stack
from tests.support.worker import drain

ALICE, BOB, CAROL = 2001, 2002, 2003
NAMES = {ALICE: "alice", BOB: "bob", CAROL: "carol"}
GUILD_A, GUILD_B = 500, 600
CHANNEL_A, CHANNEL_B = 300, 301
DM_CHANNELS = {ALICE: 900, BOB: 901, CAROL: 902}
ADMIN = {"Authorization": "Bearer test-admin-secret-8c2e4a6f1d3b5907"}
REPLY = "Noted, thank you!"


def writer_or_reply(body: dict[str, Any]) -> Text:
    """The memory writer answers with the speaker's newest line as the fact; everything
    else (replies, episodes, diaries) is a fixed text that quotes nobody."""
    system = " ".join(block["text"] for block in body.get("system") or [])
    if "memory note" in system:
        lines = read_lines(str(body["messages"][0]["content"]))
        said = [line["text"] for line in lines if line.get("speaker") is True]
        return Text(json.dumps({"subject": "speaker", "fact": f"Fact: {said[-1]}"}))
    return Text(REPLY)


@dataclass
class World:
    stack: Stack

    def say(
        self,
        who: int,
        content: str,
        *,
        guild: int | None = GUILD_A,
        channel: int | None = None,
        mention: bool = True,
        reply_to: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        """A gateway frame: ``who`` says ``content`` in a guild channel (mentioning the bot)
        or, with ``guild=None``, in their DM with the bot; ``reply_to``: the message quoted."""
        if channel is None:
            channel = DM_CHANNELS[who] if guild is None else CHANNEL_A
        text = f"<@{BOT_ID}> {content}" if mention and guild is not None else content
        return message_create(
            content=text,
            author_id=who,
            author_name=NAMES[who],
            channel_id=channel,
            guild_id=guild,
            message_id=next_id(),
            reply_to=reply_to,
        )

    async def tell(self, who: int, content: str, **where: Any) -> dict[str, Any]:
        frame = self.say(who, content, **where)
        await self.stack.deliver(frame)
        return frame

    def reply_prompts(self) -> list[str]:
        """Every reply prompt the model was sent (system blocks and turns), as text."""
        prompts = []
        for body in self.stack.model.requests:
            system = " ".join(block["text"] for block in body.get("system") or [])
            if "memory note" in system:
                continue
            prompts.append(system + "\n" + json.dumps(body.get("messages"), ensure_ascii=False))
        return prompts

    def last_reply_prompt(self) -> str:
        return self.reply_prompts()[-1]

    def dm_text(self, who: int) -> str:
        return "\n".join(m["content"] for m in self.stack.discord.dms_to(who))

    def channel_texts(self, channel: int) -> list[str]:
        return self.stack.discord.texts_in(channel)

    async def admin(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        # An export of a person's whole history is megabytes: httpx's 5 s default is shorter
        # than it takes on a loaded two-core machine.
        async with httpx.AsyncClient(
            base_url=self.stack.api, headers=ADMIN, timeout=30, verify=httpx_tls()
        ) as api:
            return await api.request(method, path, **kwargs)


@asynccontextmanager
async def trust_world(
    settings: Settings, monkeypatch: pytest.MonkeyPatch, **overrides: Any
) -> AsyncIterator[World]:
    async with running_stack(settings, monkeypatch, **overrides) as stack:
        stack.model.responder = writer_or_reply
        stack.jev.answers[Question.WORTH_KEEPING] = 0.9
        stack.jev.answers[Question.ADD_MEMORY] = 0.9
        yield World(stack)


# ``trust_world`` with its settings and monkeypatch bound: the conftest's ``world_with``.
WorldWith = Callable[..., AbstractAsyncContextManager[World]]


async def reply_holding_her_memory(world: World) -> dict[str, Any]:
    """Alice tells a fact; Bob asks about her and the bot's reply to him is written from her
    memory (with participants' recall): that reply, as the Discord fake posted it."""
    stack = world.stack
    await world.tell(ALICE, "I keep bees on the roof")
    stack.jev.answers[Question.WORTH_KEEPING] = 0.0
    stack.model.responder = lambda body: Text("Bob, Alice's bees are doing well")
    asked = await world.tell(BOB, "how are Alice's hives?")
    [to_bob] = [m for m in stack.discord.messages_in(CHANNEL_A) if "Bob," in m["content"]]
    return {"asked": asked, "reply": to_bob}


async def tonight(world: World) -> dict[str, Any]:
    """The operator starts tonight's run through the admin API; the real worker runs it."""
    async with httpx.AsyncClient(
        base_url=world.stack.api, headers=ADMIN, verify=httpx_tls()
    ) as api:
        started = await api.post("/nightly/run")
        assert started.status_code == 202, started.text
        await drain(world.stack.settings)
        run: dict[str, Any] = (await api.get(f"/nightly/runs/{started.json()['runId']}")).json()
    assert run["status"] == "finished", run
    return run
