"""The chat-model client against FakeAnthropic on a local port: the request it sends, usage in
the spend scope and metrics, the SDK's retries, and one typed error for every failure."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import anthropic
import httpx2
import pytest
from prometheus_client import REGISTRY

from app.chat.anthropic import AnthropicChat, build_anthropic
from app.chat.base import ChatFailed, Purpose
from app.chat.fake import Delay, Failure, FakeAnthropic, Text
from app.chat.metered import MeteredChat
from app.config import Settings
from app.kit.spend import record_decision, spend_scope
from tests.support.servers import serve

FAST_RETRY = 0.01
HELLO = [{"role": "user", "content": "Aiko: hello"}]


@pytest.fixture
def model() -> FakeAnthropic:
    return FakeAnthropic()


@pytest.fixture
async def model_url(model: FakeAnthropic) -> AsyncIterator[str]:
    async with serve(model.app) as url:
        yield url


@pytest.fixture
async def chat(model_url: str) -> AsyncIterator[MeteredChat]:
    async with httpx2.AsyncClient() as http:
        client = anthropic.AsyncAnthropic(
            api_key="chat-key", base_url=model_url, http_client=http, max_retries=2, timeout=5
        )
        yield MeteredChat(AnthropicChat(client, model="chat-model"))


def sample(name: str, **labels: str) -> float:
    return REGISTRY.get_sample_value(name, labels) or 0.0


async def test_success_sends_system_blocks_in_order_and_records_usage(
    model: FakeAnthropic, chat: MeteredChat
) -> None:
    model.push(Text("  hi Aiko!  "))
    calls = sample("model_calls_total", purpose="reply", outcome="ok")
    tokens_out = sample("model_tokens_total", purpose="reply", direction="output")

    with spend_scope() as spend:
        text = await chat.write(
            Purpose.REPLY, system=["summary", "memories", "PERSONA"], messages=HELLO, max_tokens=300
        )

    assert text == "hi Aiko!"
    [sent] = model.requests
    assert sent["model"] == "chat-model"
    assert sent["max_tokens"] == 300
    assert sent["system"] == [
        {"type": "text", "text": "summary"},
        {"type": "text", "text": "memories"},
        {"type": "text", "text": "PERSONA"},
    ]
    assert sent["messages"] == HELLO
    assert spend.model_calls == 1
    assert spend.output_tokens == 7  # what the fake reports
    assert spend.input_tokens > 0
    assert spend.by_purpose["reply"].model_calls == 1
    assert sample("model_calls_total", purpose="reply", outcome="ok") == calls + 1
    assert sample("model_tokens_total", purpose="reply", direction="output") == tokens_out + 7


async def test_overloaded_then_success_is_retried(model: FakeAnthropic, chat: MeteredChat) -> None:
    model.push(Failure(529, retry_after=FAST_RETRY), Text("second time lucky"))

    text = await chat.write(Purpose.DIARY, system=["persona"], messages=HELLO)

    assert text == "second time lucky"
    assert len(model.requests) == 2


async def test_rate_limited_then_success_is_retried(
    model: FakeAnthropic, chat: MeteredChat
) -> None:
    model.push(Failure(429, retry_after=FAST_RETRY), Text("ok now"))

    assert await chat.write(Purpose.EPISODE, system=[], messages=HELLO) == "ok now"
    assert "system" not in model.requests[1]


async def test_persistent_failure_is_chat_failed(model: FakeAnthropic, chat: MeteredChat) -> None:
    model.default = Failure(529, retry_after=FAST_RETRY)
    failed = sample("model_calls_total", purpose="style", outcome="status_529")

    with spend_scope() as spend, pytest.raises(ChatFailed) as caught:
        await chat.write(Purpose.STYLE, system=["persona"], messages=HELLO)

    assert len(model.requests) == 3  # one try and the SDK's two retries
    assert "chat-key" not in str(caught.value)
    assert sample("model_calls_total", purpose="style", outcome="status_529") == failed + 1
    assert (spend.model_calls, spend.input_tokens) == (1, 0)


async def test_bad_request_is_not_retried(model: FakeAnthropic, chat: MeteredChat) -> None:
    model.default = Failure(400)

    with pytest.raises(ChatFailed):
        await chat.write(Purpose.TASK, system=["persona"], messages=HELLO)
    assert len(model.requests) == 1


@pytest.mark.parametrize("empty", ["", "   \n"])
async def test_empty_text_is_chat_failed(
    model: FakeAnthropic, chat: MeteredChat, empty: str
) -> None:
    model.push(Text(empty))

    with spend_scope() as spend, pytest.raises(ChatFailed):
        await chat.write(Purpose.MEMORY_TEXT, system=["persona"], messages=HELLO)
    assert spend.output_tokens == 7  # the tokens were spent all the same


async def test_timeout_is_chat_failed(model: FakeAnthropic, model_url: str) -> None:
    model.default = Delay(1.0, Text("late"))
    async with httpx2.AsyncClient() as http:
        client = anthropic.AsyncAnthropic(
            api_key="k", base_url=model_url, http_client=http, max_retries=0
        )
        chat = MeteredChat(AnthropicChat(client, model="m", timeout_s=0.1))
        with pytest.raises(ChatFailed, match="timeout"):
            await chat.write(Purpose.REPLY, system=["p"], messages=HELLO)


def bot_settings() -> Settings:
    return Settings(
        database_url="postgresql+asyncpg://unused@127.0.0.1/unused",
        gateway_token="unused-gateway-token-0a1b2c3d4e5f6a7b",
        chat_timeout_s=3,
        _env_file=None,
    )


async def test_build_anthropic_reads_the_environment(
    model: FakeAnthropic, model_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANTHROPIC_BASE_URL", model_url)
    monkeypatch.setenv("ANTHROPIC_API_KEY", "env-key")
    model.push(Text("hello"))
    async with httpx2.AsyncClient() as http:
        client = build_anthropic(bot_settings(), http)

        assert (
            await MeteredChat(AnthropicChat(client, model="m")).write(
                Purpose.REPLY, system=["p"], messages=HELLO
            )
            == "hello"
        )
    assert client.api_key == "env-key"
    assert client.max_retries == 2
    assert client.timeout == 3


async def test_build_anthropic_without_a_key_fails_calls_not_construction(
    model: FakeAnthropic, model_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANTHROPIC_BASE_URL", model_url)
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    monkeypatch.delenv("ANTHROPIC_AUTH_TOKEN", raising=False)
    model.default = Failure(401)  # what the real API answers to a placeholder key
    async with httpx2.AsyncClient() as http:
        client = build_anthropic(bot_settings(), http)

        with pytest.raises(ChatFailed, match="status_401"):
            await MeteredChat(AnthropicChat(client, model="m")).write(
                Purpose.REPLY, system=[], messages=HELLO
            )


# The spend tracker itself.


async def test_spend_scope_collects_tasks_started_inside_it() -> None:
    async def one_decision() -> None:
        record_decision("is_task")

    with spend_scope() as outer:
        with spend_scope() as inner:
            await asyncio.gather(one_decision(), one_decision())
        record_decision("is_task")

    assert inner.decision_calls == 2
    assert outer.decision_calls == 3


async def test_calls_outside_a_scope_are_not_tracked() -> None:
    record_decision("is_task")
    with spend_scope() as spend:
        pass
    record_decision("is_task")

    assert spend.as_dict() == {
        "decision_calls": 0,
        "model_calls": 0,
        "input_tokens": 0,
        "output_tokens": 0,
        "by_purpose": {},
    }
