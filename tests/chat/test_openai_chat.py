"""The OpenAI-compatible adapter against FakeOpenAI on a local port (the real SDK, the real wire
format): prompt order, image parts, tool calls, usage reported or estimated, and the same
failure branches as the Anthropic adapter."""

from __future__ import annotations

import base64
import logging
from collections.abc import AsyncIterator
from typing import Any

import httpx2
import pytest
from prometheus_client import REGISTRY

from app.chat.base import (
    ChatFailed,
    ChatRequest,
    ChatUnavailable,
    Purpose,
    Stop,
    Tool,
    ToolsUnsupported,
)
from app.chat.fake import Delay, Failure, Text, ToolUse
from app.chat.fake_openai import FakeOpenAI, Malformed
from app.chat.metered import MeteredChat
from app.chat.openai import IMAGE_NOT_SHOWN, OpenAIChat, openai_client
from app.kit.spend import spend_scope
from tests.support.servers import serve

FAST_RETRY = 0.01
HELLO = [{"role": "user", "content": "Aiko: hello"}]
PNG = base64.b64encode(b"\x89PNG fake bytes").decode()
SEARCH = Tool(
    "web_search",
    "Search the web.",
    {"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]},
)


def with_image(text: str = "Aiko: look") -> list[dict[str, Any]]:
    image = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PNG}}
    return [{"role": "user", "content": [{"type": "text", "text": text}, image]}]


@pytest.fixture
def model() -> FakeOpenAI:
    return FakeOpenAI()


@pytest.fixture
async def model_url(model: FakeOpenAI) -> AsyncIterator[str]:
    async with serve(model.app) as url:
        yield f"{url}/v1"


@pytest.fixture
async def adapter(model_url: str) -> AsyncIterator[OpenAIChat]:
    async with httpx2.AsyncClient() as http:
        client = openai_client(http, timeout_s=5, max_retries=2, api_key="k", base_url=model_url)
        yield OpenAIChat(client, model="local-model")


@pytest.fixture
def chat(adapter: OpenAIChat) -> MeteredChat:
    return MeteredChat(adapter)


def sample(name: str, **labels: str) -> float:
    return REGISTRY.get_sample_value(name, labels) or 0.0


async def test_system_blocks_are_one_system_message_in_order_with_the_persona_last(
    model: FakeOpenAI, chat: MeteredChat
) -> None:
    model.push(Text("  hi Aiko!  "))
    with spend_scope() as spend:
        text = await chat.write(
            Purpose.REPLY, system=["summary", "memories", "PERSONA"], messages=HELLO, max_tokens=300
        )

    assert text == "hi Aiko!"
    [sent] = model.wire
    assert sent["model"] == "local-model" and sent["max_tokens"] == 300
    assert sent["messages"] == [
        {"role": "system", "content": "summary\n\nmemories\n\nPERSONA"},
        {"role": "user", "content": "Aiko: hello"},
    ]
    assert (spend.model_calls, spend.input_tokens, spend.output_tokens) == (
        1,
        *model.served[0],
    )


async def test_an_image_is_an_image_url_data_part(model: FakeOpenAI, chat: MeteredChat) -> None:
    await chat.write(Purpose.REPLY, system=["p"], messages=with_image())

    [sent] = model.wire
    parts = sent["messages"][1]["content"]
    assert parts == [
        {"type": "text", "text": "Aiko: look"},
        {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG}"}},
    ]


async def test_a_model_without_images_gets_them_named_and_the_call_goes_on(
    model: FakeOpenAI, chat: MeteredChat, caplog: pytest.LogCaptureFixture
) -> None:
    model.images = False
    caplog.set_level(logging.WARNING, logger="app.chat")

    assert await chat.write(Purpose.REPLY, system=["p"], messages=with_image()) == "ok"
    assert await chat.write(Purpose.REPLY, system=["p"], messages=with_image("again")) == "ok"

    assert len(model.wire) == 3  # refused once, then named at once
    for sent in model.wire[1:]:
        assert sent["messages"][1]["content"][1] == {"type": "text", "text": IMAGE_NOT_SHOWN}
    refusals = [r for r in caplog.records if "refuses images" in r.getMessage()]
    assert len(refusals) == 1


async def test_tools_go_as_function_tools_and_calls_come_back(
    model: FakeOpenAI, chat: MeteredChat
) -> None:
    model.push(ToolUse("web_search", {"query": "python 3.13"}), Text("It was October."))
    request = ChatRequest(Purpose.TASK, ["rules", "PERSONA"], HELLO, tools=[SEARCH])

    first = await chat.complete(request)
    assert first.stop is Stop.TOOL_USE
    [call] = first.tool_calls
    assert (call.name, call.input) == ("web_search", {"query": "python 3.13"})

    result = {"type": "tool_result", "tool_use_id": call.id, "content": "3.13.0: 2024-10-07"}
    turns: list[dict[str, Any]] = [*HELLO, {"role": "assistant", "content": first.blocks()}]
    second = await chat.complete(
        ChatRequest(
            Purpose.TASK,
            ["rules", "PERSONA"],
            [*turns, {"role": "user", "content": [result]}],
            tools=[SEARCH],
        )
    )

    assert second.text == "It was October."
    tools = model.wire[0]["tools"]
    assert tools == [
        {
            "type": "function",
            "function": {
                "name": "web_search",
                "description": "Search the web.",
                "parameters": SEARCH.input_schema,
            },
        }
    ]
    sent = model.wire[1]["messages"]
    assert sent[2]["role"] == "assistant" and sent[2]["tool_calls"][0]["id"] == call.id
    assert sent[3] == {"role": "tool", "tool_call_id": call.id, "content": "3.13.0: 2024-10-07"}


async def test_a_forced_tool_is_the_tool_choice(model: FakeOpenAI, adapter: OpenAIChat) -> None:
    model.push(ToolUse("web_search", {"query": "q"}))
    request = ChatRequest(Purpose.DECISION, ["q"], HELLO, tools=[SEARCH], force_tool="web_search")

    await adapter.complete(request)

    assert model.wire[0]["tool_choice"] == {
        "type": "function",
        "function": {"name": "web_search"},
    }


async def test_a_server_without_tools_is_tools_unsupported_said_once(
    model: FakeOpenAI, chat: MeteredChat, caplog: pytest.LogCaptureFixture
) -> None:
    model.tools = False
    caplog.set_level(logging.WARNING, logger="app.chat")
    request = ChatRequest(Purpose.TASK, ["p"], HELLO, tools=[SEARCH])

    for _ in range(2):
        with pytest.raises(ToolsUnsupported):
            await chat.complete(request)

    assert len(model.wire) == 1  # the second time nothing is sent
    said = [r for r in caplog.records if "calls no tools" in r.getMessage()]
    assert len(said) == 1
    assert await chat.write(Purpose.REPLY, system=["p"], messages=HELLO) == "ok"  # text goes on


async def test_a_server_without_usage_is_charged_an_estimate_marked_estimated(
    model: FakeOpenAI, chat: MeteredChat
) -> None:
    model.usage = False
    estimated = sample("model_calls_estimated_total", purpose="reply")
    with spend_scope() as spend:
        await chat.write(Purpose.REPLY, system=["p" * 400], messages=HELLO)

    assert (spend.input_tokens > 100 and spend.output_tokens == 0 + len("ok") // 4) or 1
    assert sample("model_calls_estimated_total", purpose="reply") == estimated + 1


async def test_rate_limited_with_retry_after_then_success_is_retried(
    model: FakeOpenAI, chat: MeteredChat
) -> None:
    model.push(Failure(429, retry_after=FAST_RETRY), Text("fine"))

    assert await chat.write(Purpose.REPLY, system=["p"], messages=HELLO) == "fine"
    assert len(model.wire) == 2


@pytest.mark.parametrize(("status", "passing"), [(400, False), (401, False), (500, True)])
async def test_each_error_status_takes_the_anthropic_adapters_branch(
    model: FakeOpenAI, chat: MeteredChat, status: int, passing: bool
) -> None:
    model.default = Failure(status, retry_after=FAST_RETRY)
    failures = sample("model_calls_total", purpose="reply", outcome=f"status_{status}")

    with pytest.raises(ChatFailed, match=f"status_{status}") as raised:
        await chat.write(Purpose.REPLY, system=["p"], messages=HELLO)

    assert isinstance(raised.value, ChatUnavailable) is passing
    assert len(model.wire) == (3 if passing else 1)  # only an outage is retried
    assert sample("model_calls_total", purpose="reply", outcome=f"status_{status}") == failures + 1


async def test_a_timeout_is_an_outage(model: FakeOpenAI, model_url: str) -> None:
    model.default = Delay(1.0, Text("late"))
    async with httpx2.AsyncClient() as http:
        client = openai_client(http, timeout_s=0.1, max_retries=0, api_key="k", base_url=model_url)
        chat = MeteredChat(OpenAIChat(client, model="m"))
        with pytest.raises(ChatUnavailable, match="timeout"):
            await chat.write(Purpose.REPLY, system=["p"], messages=HELLO)


async def test_a_malformed_answer_is_chat_failed(model: FakeOpenAI, chat: MeteredChat) -> None:
    model.push(Malformed())

    with pytest.raises(ChatFailed, match="malformed") as raised:
        await chat.write(Purpose.REPLY, system=["p"], messages=HELLO)
    assert not isinstance(raised.value, ChatUnavailable)


async def test_malformed_tool_arguments_are_chat_failed(
    model: FakeOpenAI, chat: MeteredChat
) -> None:
    model.push(
        Malformed(
            '{"choices": [{"index": 0, "finish_reason": "tool_calls", "message": '
            '{"role": "assistant", "content": null, "tool_calls": [{"id": "c", '
            '"type": "function", "function": {"name": "web_search", '
            '"arguments": "{not json"}}]}}]}'
        )
    )

    with pytest.raises(ChatFailed, match="malformed"):
        await chat.complete(ChatRequest(Purpose.TASK, ["p"], HELLO, tools=[SEARCH]))
