"""The bot's core flow, end to end through its real entry points: a mention posted to the
webhook becomes a turn (reaction and reply), the reply's memory job writes the speaker's
memory, and a nightly run started through the admin API runs its steps to the end. Run on
any infrastructure (PgBouncer, Sentinel) to show the bot works there."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import httpx

from app.chat.fake import Text
from app.db import SessionFactory
from app.decision.vocabulary import Question
from app.kit.tls import httpx_tls
from tests.support.frames import message_create
from tests.support.memory_env import memories_of
from tests.support.stack import BOT_ID, Stack
from tests.support.worker import drain

AUTH = {"Authorization": "Bearer test-admin-secret-8c2e4a6f1d3b5907"}
SPEAKER = 2001
FACT = "Alice is learning the cello."
REPLY = "How lovely!"


def answers(body: dict[str, Any]) -> Text:
    system = " ".join(block["text"] for block in body.get("system", []))
    if "memory note" in system:
        return Text(json.dumps({"subject": "speaker", "fact": FACT}))
    return Text(REPLY)


@dataclass(frozen=True)
class CoreFlow:
    replies: list[str]
    reactions: int
    memories: list[str]
    night: dict[str, Any]


async def run_core_flow(stack: Stack, sessions: SessionFactory) -> CoreFlow:
    """The flow above; ``sessions`` reads the outcome straight from Postgres."""
    stack.model.responder = answers
    stack.jev.answers[Question.WORTH_KEEPING] = 0.9
    frame = message_create(content=f"<@{BOT_ID}> I started cello lessons!", author_id=SPEAKER)
    await stack.deliver(frame)  # the turn, then its memory job, on the real worker
    async with httpx.AsyncClient(base_url=stack.api, headers=AUTH, verify=httpx_tls()) as api:
        started = await api.post("/nightly/run")
        assert started.status_code == 202, started.text
        await drain(stack.settings)  # every step of the night
        night = (await api.get(f"/nightly/runs/{started.json()['runId']}")).json()
    return CoreFlow(
        replies=[m["content"] for m in stack.replies()],
        reactions=len(stack.discord.reactions_on(int(frame["d"]["id"]))),
        memories=list((await memories_of(sessions, SPEAKER)).values()),
        night=night,
    )
