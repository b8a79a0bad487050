"""Attachments end to end: an addressed message's images reach the chat model as image
blocks with the bytes the worker fetched from the (fake) CDN, a text file as its marked
content; nothing is fetched off DISCORD_ATTACHMENT_HOSTS or over a limit; the decision model
and the memory write path see names only; the task agent's message carries the same."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest
from pydantic import SecretStr
from sqlalchemy import select

from app.agent.fake_jina import FakeJina
from app.chat.fake import Text
from app.config import Settings
from app.db import SessionFactory
from app.decision.vocabulary import Question
from app.discord.attachments import (
    MAX_IMAGE_BYTES,
    MAX_TEXT_BYTES,
    MAX_TEXT_TOTAL_BYTES,
    Skip,
)
from app.kit.attribution import read_lines
from app.models.agent import AgentSession
from app.models.messages import Message
from tests.support.frames import message_create
from tests.support.inbox import inbox_row
from tests.support.providers import BOTH_PROVIDERS
from tests.support.servers import serve
from tests.support.stack import BOT_ID, Stack, running_stack

pytestmark = BOTH_PROVIDERS

MENTION = f"<@{BOT_ID}>"
PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 4
NOTES = "Deploy failed at step 3:\nERROR: disk full on /var\n"


def blocks_of(request: dict[str, Any]) -> list[dict[str, Any]]:
    """The content blocks of the last (the addressed message's) turn."""
    content = request["messages"][-1]["content"]
    return content if isinstance(content, list) else [{"type": "text", "text": content}]


async def test_an_image_and_a_text_file_reach_the_chat_model_with_their_content(
    stack: Stack, sessions: SessionFactory
) -> None:
    image = stack.cdn.attachment("cat.png", PNG, "image/png")
    notes = stack.cdn.attachment("deploy.log", NOTES.encode(), "text/plain; charset=utf-8")
    message = message_create(
        content=f"{MENTION} what went wrong? and look at my cat", attachments=[image, notes]
    )
    await stack.deliver(message)

    [request] = stack.model.requests
    blocks = blocks_of(request)
    [picture] = [b for b in blocks if b["type"] == "image"]
    assert picture["source"]["media_type"] == "image/png"
    assert base64.b64decode(picture["source"]["data"]) == PNG
    [file_block] = [b["text"] for b in blocks if "<file name=" in b.get("text", "")]
    assert '<file name="deploy.log" type="text/plain">' in file_block
    assert "ERROR: disk full on /var" in file_block
    assert stack.cdn.fetched(str(image["url"])) == stack.cdn.fetched(str(notes["url"])) == 1
    # The decision model saw the message with its attachments named, never their content.
    for body in stack.jev.requests:
        assert (
            "disk full" not in body["prompt"]
            and base64.b64encode(PNG).decode()[:40] not in body["prompt"]
        )
    assert "deploy.log (text/plain" in stack.jev.asked(Question.EMOJI_CHOICE)[0]["prompt"]
    async with sessions() as session:
        logged = await session.get(Message, int(message["d"]["id"]))
    assert logged is not None
    assert [a["filename"] for a in logged.attachments] == ["cat.png", "deploy.log"]
    assert "url" not in json.dumps(logged.attachments)  # names, types and sizes only


async def test_a_file_declaring_a_charset_that_is_no_text_codec_is_read_as_utf8(
    stack: Stack, sessions: SessionFactory
) -> None:
    odd = [
        stack.cdn.attachment(f"{name}.txt", "Grüße\n".encode(), f"text/plain; charset={name}")
        for name in ("undefined", "zlib_codec")
    ]
    message = message_create(content=f"{MENTION} read these", attachments=odd)
    await stack.deliver(message)

    [request] = stack.model.requests
    files = [b["text"] for b in blocks_of(request) if "<file name=" in b.get("text", "")]
    assert len(files) == 2 and all("Grüße" in text for text in files)
    assert stack.replies()[0]["content"] == "Hello from the model!"  # the turn went on
    row = await inbox_row(sessions, message["d"]["id"])
    assert row.handled_at is not None and row.dead_at is None and row.attempts == 1


async def test_ten_text_files_of_100_kb_send_at_most_the_messages_total(stack: Stack) -> None:
    files = [
        stack.cdn.attachment(f"part{n}.log", bytes([65 + n]) * MAX_TEXT_BYTES, "text/plain")
        for n in range(10)
    ]
    await stack.deliver(message_create(content=f"{MENTION} read all of it", attachments=files))

    [request] = stack.model.requests
    texts = [b["text"] for b in blocks_of(request) if b["type"] == "text"]
    shown = [t for t in texts if "<file name=" in t]
    bodies = [t.split(">\n", 1)[1].rsplit("\n</file>", 1)[0] for t in shown]
    assert sum(len(b) for b in bodies) == MAX_TEXT_TOTAL_BYTES  # two whole files, never ten
    assert len(shown) == 2
    named = [t for t in texts if t.endswith(f"not shown: {Skip.TOTAL}]")]
    assert len(named) == 8
    assert sum(stack.cdn.fetched(str(f["url"])) for f in files) == 2  # the rest never fetched


async def test_unlisted_hosts_and_images_over_5_mb_are_named_and_never_fetched(
    stack: Stack,
) -> None:
    away = stack.cdn.attachment("away.png", PNG, "image/png")
    away["url"] = str(away["url"]).replace("127.0.0.1", "localhost")  # not in the list
    huge = stack.cdn.attachment("huge.png", PNG, "image/png", size=MAX_IMAGE_BYTES + 1)
    await stack.deliver(message_create(content=f"{MENTION} see these", attachments=[away, huge]))

    assert stack.cdn.requests == []
    [request] = stack.model.requests
    named = [b["text"] for b in blocks_of(request) if b["type"] == "text"][1:]
    assert named == [
        "[Alice attached away.png (image/png, 1 KB); not shown: not on an allowed host]",
        "[Alice attached huge.png (image/png, 5.0 MB); not shown: over the size limit]",
    ]
    assert all(b["type"] != "image" for b in blocks_of(request))


async def test_the_memory_write_path_sees_an_attachment_by_name_only(stack: Stack) -> None:
    stack.jev.answers[Question.WORTH_KEEPING] = 0.1  # asked, then stop: no writes
    notes = stack.cdn.attachment("diary.txt", b"I secretly love natto.", "text/plain")
    await stack.deliver(message_create(content=f"{MENTION} read this", attachments=[notes]))

    [asked] = stack.jev.asked(Question.WORTH_KEEPING)
    assert {
        "from": "Alice",
        "speaker": True,
        "attached": ["diary.txt (text/plain, 22 B)"],
        "text": f"{MENTION} read this",
    } in read_lines(asked["prompt"])
    assert "natto" not in asked["prompt"]
    assert "natto" in str(stack.model.requests[0])  # the reply itself could read it


async def test_the_task_agents_message_carries_the_same_attachments_while_typing_shows(
    settings: Settings, sessions: SessionFactory, redis: object, monkeypatch: pytest.MonkeyPatch
) -> None:
    jina = FakeJina()
    async with (
        serve(jina.app) as jina_url,
        running_stack(
            settings,
            monkeypatch,
            jina_api_key=SecretStr(jina.api_key),
            jina_search_url=f"{jina_url}/search",
            jina_reader_url=f"{jina_url}/reader",
        ) as stack,
    ):
        stack.jev.answers[Question.IS_TASK] = True
        stack.model.default = Text("Your disk is full; clean /var.")
        image = stack.cdn.attachment("screen.png", PNG, "image/png")
        notes = stack.cdn.attachment("deploy.log", NOTES.encode(), "text/plain")
        await stack.deliver(
            message_create(content=f"{MENTION} fix my deploy", attachments=[image, notes])
        )
        [agent_call] = [r for r in stack.model.requests if "tools" in r]
        [user_message] = agent_call["messages"]
        blocks = user_message["content"]
        assert "fix my deploy" in blocks[0]["text"]
        assert (
            base64.b64decode(next(b for b in blocks if b["type"] == "image")["source"]["data"])
            == PNG
        )
        assert any("disk full on /var" in b.get("text", "") for b in blocks)
        assert stack.replies()[0]["content"] == "Your disk is full; clean /var."
        typing = stack.discord.typing_in(300)
        assert (
            typing
            and typing[-1].at < stack.discord.calls_to("POST", "/channels/300/messages")[0].at
        )
        async with sessions() as session:
            stored = json.dumps((await session.scalars(select(AgentSession.history))).one())
        assert "screen.png" in stored and "deploy.log" in stored
        assert "disk full on /var" not in stored  # the session keeps names, not contents
        assert base64.b64encode(PNG).decode()[:40] not in stored
