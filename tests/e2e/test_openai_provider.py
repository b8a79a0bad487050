"""CHAT_PROVIDER=openai end to end (webhook → real worker → turn → the OpenAI-compatible fake,
read on the wire): the persona last in the one system message, images as image_url parts (or
named for a model without images), the task agent's tool loop as tool calls (or the written
reply on a server without tools, said once), and MEMORY_MODEL for the work nobody waits on."""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from pydantic import SecretStr

from app.agent.fake_jina import FakeJina
from app.chat.fake import Reply, Text, ToolUse
from app.chat.fake_openai import FakeOpenAI
from app.chat.openai import IMAGE_NOT_SHOWN
from app.config import Provider, Settings
from app.db import SessionFactory
from app.decision.vocabulary import Question
from app.nightly.diary import DIARY_SYSTEM
from tests.support.frames import message_create
from tests.support.servers import serve
from tests.support.stack import BOT_ID, Stack, running_stack
from tests.support.worker import drain

pytestmark = pytest.mark.parametrize("provider", [Provider.OPENAI], indirect=True)

MENTION = f"<@{BOT_ID}>"
PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(64))
PERSONA = "## Core\n\nTsumugi, the channel's companion.\n\n## Style\n\nShort answers, warm."
AUTH = {"Authorization": "Bearer test-admin-secret-8c2e4a6f1d3b5907"}
TASK_ANSWER, WRITTEN = "Done: it is on the 7th.", "Here is my usual written reply."

StackFactory = Callable[..., Any]


@pytest.fixture
def open_stack(
    settings: Settings,
    sessions: SessionFactory,
    redis: object,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> StackFactory:
    persona = tmp_path / "persona.md"
    persona.write_text(PERSONA, encoding="utf-8")

    def opened(**overrides: Any) -> Any:
        overrides.setdefault("memory_consolidate_every", 1000)
        return running_stack(settings, monkeypatch, persona_path=str(persona), **overrides)

    return opened


@pytest.fixture
async def with_jina() -> AsyncIterator[dict[str, Any]]:
    jina = FakeJina()
    jina.results["release date"] = "Python 3.13.0 was released on 2024-10-07."
    async with serve(jina.app) as url:
        yield {
            "jina_api_key": SecretStr(jina.api_key),
            "jina_search_url": f"{url}/search",
            "jina_reader_url": f"{url}/reader",
        }


def wire(stack: Stack) -> list[dict[str, Any]]:
    assert isinstance(stack.model, FakeOpenAI)
    return stack.model.wire


def openai_fake(stack: Stack) -> FakeOpenAI:
    assert isinstance(stack.model, FakeOpenAI)
    return stack.model


async def test_a_mention_is_answered_with_the_persona_last_and_the_image_as_a_part(
    open_stack: StackFactory,
) -> None:
    async with open_stack() as stack:
        image = stack.cdn.attachment("cat.png", PNG, "image/png")
        await stack.deliver(
            message_create(content=f"{MENTION} look at my cat", attachments=[image])
        )

    assert [m["content"] for m in stack.replies()] == ["Hello from the model!"]
    [sent] = wire(stack)
    assert sent["model"] == "fake-chat-model"
    system, *turns = sent["messages"]
    assert system["role"] == "system" and system["content"].endswith("Short answers, warm.")
    assert all(t["role"] != "system" for t in turns)  # one system message, first
    parts = turns[-1]["content"]
    assert "look at my cat" in json.dumps(parts)
    [picture] = [p for p in parts if p["type"] == "image_url"]
    assert picture["image_url"]["url"].startswith("data:image/png;base64,")


async def test_a_model_without_images_gets_them_named_and_answers(
    open_stack: StackFactory,
) -> None:
    async with open_stack() as stack:
        openai_fake(stack).images = False
        image = stack.cdn.attachment("cat.png", PNG, "image/png")
        await stack.deliver(message_create(content=f"{MENTION} see this?", attachments=[image]))

    assert [m["content"] for m in stack.replies()] == ["Hello from the model!"]
    answered = wire(stack)[-1]["messages"][-1]["content"]
    assert {"type": "text", "text": IMAGE_NOT_SHOWN} in answered
    assert "cat.png" in json.dumps(answered)  # named by the line before it


def agent_then_written(agent: list[Reply]) -> Callable[[dict[str, Any]], Reply]:
    steps = iter(agent)
    return lambda body: next(steps, Text(TASK_ANSWER)) if "tools" in body else Text(WRITTEN)


async def test_a_task_runs_its_tool_loop_through_tool_calls(
    open_stack: StackFactory, with_jina: dict[str, Any]
) -> None:
    async with open_stack(**with_jina) as stack:
        stack.jev.answers[Question.IS_TASK] = True
        stack.model.responder = agent_then_written(
            [ToolUse("web_search", {"query": "release date"})]
        )
        await stack.deliver(message_create(content=f"{MENTION} when was 3.13 released?"))

    assert [m["content"] for m in stack.replies()] == [TASK_ANSWER]
    first, second = wire(stack)
    assert {t["function"]["name"] for t in first["tools"]} >= {"web_search", "read_page"}
    call = second["messages"][-2]
    assert call["role"] == "assistant" and call["tool_calls"][0]["function"]["name"] == "web_search"
    result = second["messages"][-1]
    assert result["role"] == "tool" and result["tool_call_id"] == call["tool_calls"][0]["id"]
    assert "2024-10-07" in result["content"]


async def test_a_server_without_tools_gives_the_written_reply_said_once(
    open_stack: StackFactory, with_jina: dict[str, Any], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="app.chat")
    async with open_stack(**with_jina) as stack:
        stack.jev.answers[Question.IS_TASK] = True
        openai_fake(stack).tools = False
        stack.model.responder = agent_then_written([])
        await stack.deliver(message_create(content=f"{MENTION} search something"))

    assert [m["content"] for m in stack.replies()] == [WRITTEN]
    said = [r for r in caplog.records if "calls no tools" in r.getMessage()]
    assert len(said) == 1
    assert len([b for b in wire(stack) if "tools" in b]) == 1  # refused, then the reply


def kind_of(body: dict[str, Any]) -> str:
    system = "".join(block["text"] for block in body.get("system") or [])
    return "diary" if system == DIARY_SYSTEM else "writer" if "memory note" in system else "reply"


def background(body: dict[str, Any]) -> Reply:
    kind = kind_of(body)
    if kind == "diary":
        return Text("今日はアリスがチェロの話をした。")
    if kind == "writer":
        return Text(json.dumps({"subject": "speaker", "fact": "Alice is learning the cello."}))
    return Text("How lovely!")


async def test_the_memory_writer_and_the_nightly_diary_use_memory_model(
    open_stack: StackFactory,
) -> None:
    async with open_stack(memory_model="small-model") as stack:
        stack.jev.answers[Question.WORTH_KEEPING] = 0.9
        stack.model.responder = background
        await stack.deliver(message_create(content=f"{MENTION} I started the cello!"))
        async with httpx.AsyncClient(base_url=stack.api, headers=AUTH) as api:
            assert (await api.post("/nightly/run")).status_code == 202
            await drain(stack.settings)

    models = {
        kind_of(view): sent["model"]
        for view, sent in zip(stack.model.requests, wire(stack), strict=True)
    }
    assert models == {"reply": "fake-chat-model", "writer": "small-model", "diary": "small-model"}
