"""The decision client against FakeJev on a real local port: answers, every failure → None,
the bearer key, the logging wrapper (metrics, log fields, spend) and the mode switch."""

from __future__ import annotations

import asyncio
import logging
import math
import re
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager

import aiohttp
import anthropic
import httpx2
import pytest
from prometheus_client import REGISTRY

from app.chat.anthropic import AnthropicChat
from app.chat.fake import FakeAnthropic, ToolUse
from app.config import Settings
from app.decision.base import NoAnswerReason, NoDecision
from app.decision.client import HttpDecider, decision_session
from app.decision.factory import open_decider
from app.decision.fake import FakeJev, Raw
from app.decision.logged import LoggedDecider
from app.decision.vocabulary import STALE_OPTIONS, VERDICT_OPTIONS, Kind, Question
from app.decision.wire import (
    INPUT_TOKENS,
    OUTPUT_TOKENS,
    UnfitAnswer,
    fit_answer,
    token_headers,
    tokens_of,
)
from app.kit.spend import spend_scope
from tests.support.servers import free_port, serve

EMOJIS = ["👍", "❤️", "😂"]


@pytest.fixture
def jev() -> FakeJev:
    return FakeJev()


@pytest.fixture
async def jev_url(jev: FakeJev) -> AsyncIterator[str]:
    async with serve(jev.app) as url:
        yield url


@pytest.fixture
async def web() -> AsyncIterator[aiohttp.ClientSession]:
    async with decision_session() as session:
        yield session


def client_pair(
    web: aiohttp.ClientSession, url: str, *, timeout_s: float = 2.0
) -> tuple[HttpDecider, LoggedDecider]:
    """The raw client (``decide`` raises NoDecision with its reason) and the same client as
    the bot uses it, behind the LoggedDecider that turns "no answer" into None."""
    raw = HttpDecider(web, base_url=url, api_key=None, timeout_s=timeout_s)
    return raw, LoggedDecider(raw)


def decider(web: aiohttp.ClientSession, url: str, *, timeout_s: float = 2.0) -> LoggedDecider:
    return client_pair(web, url, timeout_s=timeout_s)[1]


async def test_each_kind_returns_its_typed_answer(
    jev: FakeJev, jev_url: str, web: aiohttp.ClientSession
) -> None:
    jev.answers[Question.IS_TASK] = True
    jev.answers[Question.WORTH_KEEPING] = 0.73
    jev.answers[Question.MEMORY_VERDICT] = "update"
    client = decider(web, jev_url)

    assert await client.boolean(Question.IS_TASK, "find me a paper") is True
    assert await client.probability(Question.WORTH_KEEPING, "I moved to Osaka") == 0.73
    assert await client.choice(Question.MEMORY_VERDICT, "x", VERDICT_OPTIONS) == "update"
    assert jev.requests == [
        {"question": "is_task", "kind": "boolean", "prompt": "find me a paper", "options": None},
        {
            "question": "worth_keeping",
            "kind": "probability",
            "prompt": "I moved to Osaka",
            "options": None,
        },
        {
            "question": "memory_verdict",
            "kind": "choice",
            "prompt": "x",
            "options": ["keep", "update", "delete"],
        },
    ]


async def test_false_and_zero_are_answers_not_missing_answers(
    jev: FakeJev, jev_url: str, web: aiohttp.ClientSession
) -> None:
    jev.answers[Question.IS_CORRECTION] = False
    jev.answers[Question.ADD_MEMORY] = 0
    client = decider(web, jev_url)

    assert await client.boolean(Question.IS_CORRECTION, "thanks!") is False
    assert await client.probability(Question.ADD_MEMORY, "x") == 0.0


async def test_fake_defaults_are_the_conservative_answers(
    jev_url: str, web: aiohttp.ClientSession
) -> None:
    client = decider(web, jev_url)

    assert await client.boolean(Question.EMOJI_ENOUGH, "hi") is False
    assert await client.probability(Question.WORTH_KEEPING, "hi") == 0.0
    assert await client.choice(Question.EMOJI_CHOICE, "hi", EMOJIS) == "👍"
    assert await client.choice(Question.STALE_KEEP, "old", STALE_OPTIONS) == "keep"


async def test_fake_answer_can_depend_on_the_request(
    jev: FakeJev, jev_url: str, web: aiohttp.ClientSession
) -> None:
    jev.answers[Question.MEMORY_VERDICT] = lambda body: (
        "update" if "coffee" in body["prompt"] else "keep"
    )
    client = decider(web, jev_url)

    assert await client.choice(Question.MEMORY_VERDICT, "likes coffee", VERDICT_OPTIONS) == "update"
    assert await client.choice(Question.MEMORY_VERDICT, "likes tea", VERDICT_OPTIONS) == "keep"
    assert [b["prompt"] for b in jev.asked(Question.MEMORY_VERDICT)] == [
        "likes coffee",
        "likes tea",
    ]


async def test_bearer_key_is_sent(jev: FakeJev, jev_url: str, web: aiohttp.ClientSession) -> None:
    jev.api_key = "s3cret"
    jev.answers[Question.IS_TASK] = True
    keyed = LoggedDecider(HttpDecider(web, base_url=jev_url, api_key="s3cret", timeout_s=2))
    wrong = LoggedDecider(HttpDecider(web, base_url=jev_url, api_key="nope", timeout_s=2))

    assert await keyed.boolean(Question.IS_TASK, "x") is True
    assert await wrong.boolean(Question.IS_TASK, "x") is None
    assert "s3cret" not in repr(keyed)


# Each case: the fake's answer for worth_keeping (a probability question) and why it fails.
PROBABILITY_FAILURES = [
    pytest.param(Raw(500, {"detail": "boom"}), NoAnswerReason.STATUS, id="500"),
    pytest.param(Raw(502, {"detail": "model failed"}), NoAnswerReason.STATUS, id="502"),
    pytest.param(Raw(200, "not json {"), NoAnswerReason.MALFORMED, id="malformed-json"),
    pytest.param(Raw(200, {"answer": True}), NoAnswerReason.MALFORMED, id="wrong-kind"),
    pytest.param(Raw(200, {"choice": "keep"}), NoAnswerReason.MALFORMED, id="choice-for-prob"),
    pytest.param(
        Raw(200, {"probability": 0.7, "answer": True}), NoAnswerReason.MALFORMED, id="extra-key"
    ),
    pytest.param(Raw(200, {}), NoAnswerReason.MALFORMED, id="empty-object"),
    pytest.param(Raw(200, [0.7]), NoAnswerReason.MALFORMED, id="list"),
    pytest.param(True, NoAnswerReason.MALFORMED, id="bool-as-probability"),
    pytest.param("0.7", NoAnswerReason.MALFORMED, id="string-as-probability"),
    pytest.param(1.5, NoAnswerReason.UNFIT, id="probability-1.5"),
    pytest.param(-0.1, NoAnswerReason.UNFIT, id="probability-negative"),
    pytest.param(Raw(200, '{"probability": NaN}'), NoAnswerReason.UNFIT, id="nan"),
]


@pytest.mark.parametrize(("reply", "reason"), PROBABILITY_FAILURES)
async def test_probability_failures_are_no_answer(
    jev: FakeJev, jev_url: str, web: aiohttp.ClientSession, reply: object, reason: NoAnswerReason
) -> None:
    jev.answers[Question.WORTH_KEEPING] = reply  # type: ignore[assignment]
    raw, client = client_pair(web, jev_url)

    assert await client.probability(Question.WORTH_KEEPING, "x") is None
    with pytest.raises(NoDecision) as caught:
        await raw.decide(Question.WORTH_KEEPING, "x", None)
    assert caught.value.reason is reason


@pytest.mark.parametrize(
    ("reply", "reason"),
    [
        pytest.param("maybe", NoAnswerReason.UNFIT, id="choice-not-in-options"),
        pytest.param("KEEP", NoAnswerReason.UNFIT, id="choice-wrong-case"),
        pytest.param(Raw(200, {"answer": True}), NoAnswerReason.MALFORMED, id="wrong-kind"),
        pytest.param(1, NoAnswerReason.MALFORMED, id="number-as-choice"),
    ],
)
async def test_choice_failures_are_no_answer(
    jev: FakeJev, jev_url: str, web: aiohttp.ClientSession, reply: object, reason: NoAnswerReason
) -> None:
    jev.answers[Question.STALE_KEEP] = reply  # type: ignore[assignment]
    raw, client = client_pair(web, jev_url)

    assert await client.choice(Question.STALE_KEEP, "x", STALE_OPTIONS) is None
    with pytest.raises(NoDecision) as caught:
        await raw.decide(Question.STALE_KEEP, "x", STALE_OPTIONS)
    assert caught.value.reason is reason


@pytest.mark.parametrize(
    "reply",
    [
        pytest.param(1, id="int-as-boolean"),
        pytest.param("true", id="string-as-boolean"),
        pytest.param(Raw(200, {"probability": 1.0}), id="wrong-kind"),
    ],
)
async def test_boolean_failures_are_no_answer(
    jev: FakeJev, jev_url: str, web: aiohttp.ClientSession, reply: object
) -> None:
    jev.answers[Question.IS_CORRECTION] = reply  # type: ignore[assignment]

    assert await decider(web, jev_url).boolean(Question.IS_CORRECTION, "x") is None


async def test_service_down_is_no_answer(
    jev: FakeJev, jev_url: str, web: aiohttp.ClientSession
) -> None:
    jev.down = True
    jev.answers[Question.IS_TASK] = True

    assert await decider(web, jev_url).boolean(Question.IS_TASK, "x") is None


async def test_timeout_is_no_answer(jev: FakeJev, jev_url: str, web: aiohttp.ClientSession) -> None:
    jev.latency = 1.0
    jev.answers[Question.IS_TASK] = True
    raw, client = client_pair(web, jev_url, timeout_s=0.1)

    with pytest.raises(NoDecision) as caught:
        await raw.decide(Question.IS_TASK, "x", None)
    assert caught.value.reason is NoAnswerReason.TIMEOUT
    assert await client.boolean(Question.IS_TASK, "x") is None


async def test_connection_refused_is_no_answer(web: aiohttp.ClientSession) -> None:
    raw, client = client_pair(web, f"http://127.0.0.1:{free_port()}")

    with pytest.raises(NoDecision) as caught:
        await raw.decide(Question.IS_TASK, "x", None)
    assert caught.value.reason is NoAnswerReason.CONNECTION
    assert await client.boolean(Question.IS_TASK, "x") is None


Answering = Callable[[asyncio.StreamWriter], Awaitable[None]]


def json_head(length: int) -> bytes:
    """A 200's status line and headers for a JSON body of ``length`` bytes."""
    head = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n"
    return head % length


@asynccontextmanager
async def raw_server(answer: Answering, heads: list[str] | None = None) -> AsyncIterator[str]:
    """A server that reads each request (its head is kept in ``heads``) and then does what
    ``answer`` does on the socket: a service misbehaving below HTTP, which FakeJev (a
    well-formed app) cannot play, or a proxy."""

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        seen.append(head.decode("latin-1"))
        length = re.search(rb"(?i)content-length: *(\d+)", head)
        await reader.readexactly(int(length.group(1)) if length else 0)
        try:
            await answer(writer)
        finally:
            writer.close()

    seen: list[str] = [] if heads is None else heads
    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.close()


async def test_a_connection_dropped_before_the_answer_is_no_answer(
    web: aiohttp.ClientSession,
) -> None:
    async def hang_up(writer: asyncio.StreamWriter) -> None:
        return  # closed without a byte of answer

    async with raw_server(hang_up) as url:
        raw, client = client_pair(web, url)
        with pytest.raises(NoDecision) as caught:
            await raw.decide(Question.IS_TASK, "x", None)
        assert caught.value.reason is NoAnswerReason.CONNECTION
        assert await client.boolean(Question.IS_TASK, "x") is None


async def test_the_timeout_bounds_the_whole_call_not_each_read(
    web: aiohttp.ClientSession,
) -> None:
    """An answer trickled a byte at a time, each byte well inside the timeout, still ends
    at the timeout: a slow service cannot hold a turn longer than JEV_TIMEOUT_S."""
    body = b'{"answer": true}' + b" " * 24  # 40 bytes, 2 s at one byte each 50 ms

    async def trickle(writer: asyncio.StreamWriter) -> None:
        writer.write(json_head(len(body)))
        for byte in body:
            await writer.drain()
            await asyncio.sleep(0.05)
            writer.write(bytes([byte]))

    async with raw_server(trickle) as url:
        raw, _ = client_pair(web, url, timeout_s=0.3)
        started = time.monotonic()
        with pytest.raises(NoDecision) as caught:
            await raw.decide(Question.IS_TASK, "x", None)
        assert caught.value.reason is NoAnswerReason.TIMEOUT
        assert time.monotonic() - started < 1.5  # well before the body's 2 s


async def test_a_redirect_is_not_followed_and_the_key_stays(
    jev: FakeJev, jev_url: str, web: aiohttp.ClientSession
) -> None:
    jev.answers[Question.IS_TASK] = True

    async def elsewhere(writer: asyncio.StreamWriter) -> None:
        writer.write(b"HTTP/1.1 307 Temporary Redirect\r\nContent-Length: 0\r\n")
        writer.write(b"Location: %s/v1/decide\r\n\r\n" % jev_url.encode())
        await writer.drain()

    async with raw_server(elsewhere) as url:
        raw = HttpDecider(web, base_url=url, api_key="s3cret", timeout_s=2)
        with pytest.raises(NoDecision) as caught:
            await raw.decide(Question.IS_TASK, "x", None)
    assert caught.value.reason is NoAnswerReason.STATUS
    assert jev.requests == []  # neither the question nor the key went where it pointed


async def test_the_environments_proxy_carries_the_question_unless_no_proxy_exempts_it(
    jev: FakeJev, jev_url: str, web: aiohttp.ClientSession, monkeypatch: pytest.MonkeyPatch
) -> None:
    """HTTP_PROXY and NO_PROXY apply to Jev as they did when httpx asked it."""
    jev.answers[Question.IS_TASK] = True
    answer = b'{"answer": true}'

    async def proxied(writer: asyncio.StreamWriter) -> None:
        writer.write(json_head(len(answer)) + answer)
        await writer.drain()

    heads: list[str] = []
    async with raw_server(proxied, heads) as proxy:
        monkeypatch.setenv("HTTP_PROXY", proxy)
        monkeypatch.delenv("NO_PROXY", raising=False)
        monkeypatch.delenv("no_proxy", raising=False)
        through = HttpDecider(web, base_url=jev_url, api_key=None, timeout_s=2)
        assert await through.decide(Question.IS_TASK, "x", None) is True
        assert heads[0].startswith(f"POST {jev_url}/v1/decide HTTP/1.1")  # absolute: a proxy's
        assert jev.requests == []

        monkeypatch.setenv("NO_PROXY", "127.0.0.1")
        direct = HttpDecider(web, base_url=jev_url, api_key=None, timeout_s=2)
        assert await direct.decide(Question.IS_TASK, "x", None) is True
    assert len(heads) == 1
    assert len(jev.requests) == 1


async def test_asking_a_question_as_another_kind_is_a_programming_error(
    jev_url: str, web: aiohttp.ClientSession
) -> None:
    client = decider(web, jev_url)

    with pytest.raises(ValueError, match="is_task is a boolean question"):
        await client.choice(Question.IS_TASK, "x", ["yes", "no"])
    with pytest.raises(ValueError):
        await client.probability(Question.IS_CORRECTION, "x")
    with pytest.raises(ValueError):
        await client.boolean(Question.WORTH_KEEPING, "x")
    with pytest.raises(ValueError, match="non-empty list of options"):
        await client.choice(Question.STALE_KEEP, "x", [])


def sample(name: str, **labels: str) -> float:
    return REGISTRY.get_sample_value(name, labels) or 0.0


async def test_logged_decider_counts_logs_and_spends(
    jev: FakeJev, jev_url: str, web: aiohttp.ClientSession, caplog: pytest.LogCaptureFixture
) -> None:
    jev.answers[Question.WORTH_KEEPING] = 0.9
    jev.answers[Question.IS_TASK] = Raw(500, {"detail": "x"})
    logged = decider(web, jev_url)
    answered = sample("decision_calls_total", question="worth_keeping", outcome="answered")
    failed = sample("decision_calls_total", question="is_task", outcome="status")
    latencies = sample("decision_latency_seconds_count", question="worth_keeping")

    caplog.set_level(logging.INFO, logger="app.decision")
    with spend_scope() as spend:
        assert await logged.probability(Question.WORTH_KEEPING, "PRIVATE-PROMPT") == 0.9
        assert await logged.boolean(Question.IS_TASK, "PRIVATE-PROMPT") is None

    assert spend.decision_calls == 2
    assert sample("decision_calls_total", question="worth_keeping", outcome="answered") == (
        answered + 1
    )
    assert sample("decision_calls_total", question="is_task", outcome="status") == failed + 1
    assert sample("decision_latency_seconds_count", question="worth_keeping") == latencies + 1
    ok, no = [r for r in caplog.records if r.name == "app.decision"]
    assert (ok.question, ok.outcome, ok.answer) == ("worth_keeping", "answered", 0.9)  # type: ignore[attr-defined]
    assert (no.question, no.outcome) == ("is_task", "status")  # type: ignore[attr-defined]
    assert isinstance(ok.latency_ms, float)  # type: ignore[attr-defined]
    assert "PRIVATE-PROMPT" not in caplog.text


async def test_logged_decider_still_refuses_the_wrong_kind(
    jev_url: str, web: aiohttp.ClientSession
) -> None:
    logged = decider(web, jev_url)

    with pytest.raises(ValueError):
        await logged.boolean(Question.MEMORY_VERDICT, "x")


def bot_settings(**overrides: object) -> Settings:
    return Settings(
        database_url="postgresql+asyncpg://unused@127.0.0.1/unused",
        gateway_token="unused-gateway-token-0a1b2c3d4e5f6a7b",
        _env_file=None,
        **overrides,  # type: ignore[arg-type]
    )


async def test_open_decider_uses_the_service_when_jev_url_is_set(
    jev: FakeJev, jev_url: str
) -> None:
    jev.api_key = "k"
    jev.answers[Question.IS_TASK] = True
    settings = bot_settings(jev_url=jev_url, jev_api_key="k", jev_timeout_s=2)
    model = anthropic.AsyncAnthropic(api_key="unused", base_url=f"http://127.0.0.1:{free_port()}")

    async with open_decider(settings, AnthropicChat(model, model="unused")) as built:
        assert await built.boolean(Question.IS_TASK, "x") is True
    assert len(jev.requests) == 1


async def test_open_decider_answers_in_process_without_jev_url() -> None:
    fake = FakeAnthropic()
    fake.push(ToolUse("answer_probability", {"probability": 0.8}))
    async with serve(fake.app) as url, httpx2.AsyncClient() as http2:
        model = anthropic.AsyncAnthropic(api_key="t", base_url=url, http_client=http2)
        provider = AnthropicChat(model, model="unused")
        async with open_decider(bot_settings(jev_model="jev-small"), provider) as built:
            with spend_scope() as spend:
                assert await built.probability(Question.WORTH_KEEPING, "x") == 0.8

    assert spend.decision_calls == 1
    assert fake.requests[0]["model"] == "jev-small"


def test_nan_is_never_a_probability() -> None:
    for bad in (math.nan, math.inf, -math.inf):
        with pytest.raises(UnfitAnswer):
            fit_answer(Kind.PROBABILITY, None, {"probability": bad})


async def test_the_tokens_the_service_reports_are_counted_for_the_decision(
    jev: FakeJev, jev_url: str, web: aiohttp.ClientSession
) -> None:
    jev.answers[Question.WORTH_KEEPING] = 0.9
    jev.tokens = (120, 6)
    client = decider(web, jev_url)

    with spend_scope() as spend:
        assert await client.probability(Question.WORTH_KEEPING, "I moved to Osaka") == 0.9
        jev.tokens = None  # a service that does not say costs no tokens, the call still counts
        assert await client.probability(Question.WORTH_KEEPING, "and I like it") == 0.9

    [(key, spent)] = spend.usage.items()
    assert key.purpose == "worth_keeping"
    assert (spent.model_calls, spent.input_tokens, spent.output_tokens) == (2, 120, 6)


def test_token_headers_read_back_and_bad_ones_say_nothing() -> None:
    assert tokens_of(token_headers(120, 6)) == (120, 6)
    for bad in ({}, {INPUT_TOKENS: "12"}, {INPUT_TOKENS: "x", OUTPUT_TOKENS: "1"}):
        assert tokens_of(bad) is None
    assert tokens_of({INPUT_TOKENS: "-1", OUTPUT_TOKENS: "1"}) is None
