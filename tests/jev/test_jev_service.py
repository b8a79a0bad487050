"""The decision service (and the same decider in-process) against FakeAnthropic on a local port:
the forced tool call it sends, the answers it returns, and 401/422/502/504 — never a guess."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import anthropic
import httpx
import httpx2
import pytest

from app.chat.anthropic import AnthropicChat
from app.chat.fake import Delay, Failure, FakeAnthropic, Text, ToolUse
from app.decision.base import NoAnswerReason
from app.decision.instructions import INSTRUCTIONS
from app.decision.logged import LoggedDecider
from app.decision.model import (
    BadModelAnswer,
    ModelDecider,
    ModelFailed,
    ModelTimeout,
)
from app.decision.vocabulary import STALE_OPTIONS, VERDICT_OPTIONS, Question
from app.decision.wire import tokens_of
from app.jev.main import create_app
from app.jev.settings import JevSettings
from tests.jev.asking import ask
from tests.support.servers import serve

KEY = "jev-test-key"
AUTH = {"Authorization": f"Bearer {KEY}"}
FAST_RETRY = 0.01  # retry-after seconds the fake sends, so SDK retries do not slow the suite

# The service's whole budget for one decision: long enough that a loaded machine never turns a
# quick answer (or one SDK retry) into a timeout (at 0.5 s one did, in CI); a late answer comes
# well after it.
JEV_TIMEOUT_S = 2.0
LATE_S = JEV_TIMEOUT_S + 2.0


@pytest.fixture
def model() -> FakeAnthropic:
    return FakeAnthropic()


@pytest.fixture
async def sdk(model: FakeAnthropic) -> AsyncIterator[anthropic.AsyncAnthropic]:
    async with serve(model.app) as url, httpx2.AsyncClient() as http:
        yield anthropic.AsyncAnthropic(
            api_key="model-key", base_url=url, http_client=http, max_retries=1, timeout=5
        )


@pytest.fixture
async def jev(sdk: anthropic.AsyncAnthropic) -> AsyncIterator[httpx.AsyncClient]:
    """A client of the real service, served on a local port, with the bearer key set."""
    settings = JevSettings(
        jev_model="jev-model",
        jev_api_key=KEY,
        jev_timeout_s=JEV_TIMEOUT_S,
        _env_file=None,
    )
    async with (
        serve(create_app(settings, provider=AnthropicChat(sdk, model="jev-model"))) as url,
        httpx.AsyncClient(base_url=url, headers=AUTH) as client,
    ):
        yield client


async def test_boolean_request_forces_the_answer_tool(
    model: FakeAnthropic, jev: httpx.AsyncClient
) -> None:
    model.push(ToolUse("answer_boolean", {"answer": True}))

    response = await jev.post("/v1/decide", json=ask(Question.IS_CORRECTION, "no, I said Tuesday"))

    assert response.status_code == 200
    assert response.json() == {"answer": True}
    [sent] = model.requests
    assert sent["model"] == "jev-model"
    assert sent["tool_choice"] == {"type": "tool", "name": "answer_boolean"}
    assert sent["tools"] == [
        {
            "name": "answer_boolean",
            "description": "Give your answer to the question. Call this exactly once.",
            "input_schema": {
                "type": "object",
                "properties": {"answer": {"type": "boolean"}},
                "required": ["answer"],
                "additionalProperties": False,
            },
        }
    ]
    assert INSTRUCTIONS[Question.IS_CORRECTION] in sent["system"][0]["text"]
    assert sent["messages"] == [{"role": "user", "content": "no, I said Tuesday"}]


async def test_probability_request_and_answer(model: FakeAnthropic, jev: httpx.AsyncClient) -> None:
    model.push(ToolUse("answer_probability", {"probability": 0.73}))

    response = await jev.post("/v1/decide", json=ask(Question.WORTH_KEEPING))

    assert response.json() == {"probability": 0.73}
    [sent] = model.requests
    assert sent["tool_choice"] == {"type": "tool", "name": "answer_probability"}
    schema = sent["tools"][0]["input_schema"]["properties"]["probability"]
    assert schema == {"type": "number", "minimum": 0, "maximum": 1}
    assert INSTRUCTIONS[Question.WORTH_KEEPING] in sent["system"][0]["text"]


async def test_choice_request_offers_exactly_the_options(
    model: FakeAnthropic, jev: httpx.AsyncClient
) -> None:
    model.push(ToolUse("answer_choice", {"choice": "delete"}))

    response = await jev.post(
        "/v1/decide", json=ask(Question.MEMORY_VERDICT, options=list(VERDICT_OPTIONS))
    )

    assert response.json() == {"choice": "delete"}
    [sent] = model.requests
    assert sent["tool_choice"] == {"type": "tool", "name": "answer_choice"}
    schema = sent["tools"][0]["input_schema"]["properties"]["choice"]
    assert schema == {"type": "string", "enum": ["keep", "update", "delete"]}


def test_every_question_has_its_own_instruction() -> None:
    assert set(INSTRUCTIONS) == set(Question)
    assert len(set(INSTRUCTIONS.values())) == len(Question)


@pytest.mark.parametrize("status", [500, 529])
async def test_model_failure_after_retries_is_502(
    model: FakeAnthropic, jev: httpx.AsyncClient, status: int
) -> None:
    model.default = Failure(status, retry_after=FAST_RETRY)

    response = await jev.post("/v1/decide", json=ask(Question.IS_TASK))

    assert response.status_code == 502
    assert len(model.requests) == 2  # the first try and the SDK's one retry (max_retries=1)


async def test_model_overloaded_once_then_answering_is_200(
    model: FakeAnthropic, jev: httpx.AsyncClient
) -> None:
    model.push(Failure(529, retry_after=FAST_RETRY), ToolUse("answer_boolean", {"answer": False}))

    response = await jev.post("/v1/decide", json=ask(Question.IS_TASK))

    assert response.json() == {"answer": False}


async def test_model_timeout_is_504(model: FakeAnthropic, jev: httpx.AsyncClient) -> None:
    model.push(Delay(LATE_S, ToolUse("answer_boolean", {"answer": True})))

    response = await jev.post("/v1/decide", json=ask(Question.IS_TASK))

    assert response.status_code == 504


@pytest.mark.parametrize(
    ("question", "options", "reply"),
    [
        pytest.param(
            Question.STALE_KEEP,
            list(STALE_OPTIONS),
            ToolUse("answer_choice", {"choice": "archive"}),
            id="choice-outside-options",
        ),
        pytest.param(
            Question.WORTH_KEEPING,
            None,
            ToolUse("answer_probability", {"probability": 1.5}),
            id="probability-1.5",
        ),
        pytest.param(
            Question.WORTH_KEEPING,
            None,
            ToolUse("answer_probability", {"probability": True}),
            id="bool-as-probability",
        ),
        pytest.param(
            Question.IS_TASK,
            None,
            ToolUse("answer_boolean", {"answer": "yes"}),
            id="string-as-boolean",
        ),
        pytest.param(
            Question.IS_TASK,
            None,
            ToolUse("answer_boolean", {"answer": True, "why": "x"}),
            id="extra-key",
        ),
        pytest.param(
            Question.IS_TASK, None, ToolUse("other_tool", {"answer": True}), id="wrong-tool"
        ),
        pytest.param(Question.IS_TASK, None, Text("yes"), id="text-instead-of-tool"),
    ],
)
async def test_unfit_model_answer_is_502(
    model: FakeAnthropic, jev: httpx.AsyncClient, question: Question, options: Any, reply: Any
) -> None:
    model.push(reply)

    response = await jev.post("/v1/decide", json=ask(question, options=options))

    assert response.status_code == 502


@pytest.mark.parametrize(
    "headers",
    [
        pytest.param({}, id="missing"),
        pytest.param({"Authorization": "Bearer wrong"}, id="wrong"),
        pytest.param({"Authorization": KEY}, id="no-scheme"),
    ],
)
async def test_missing_or_wrong_key_is_401(
    model: FakeAnthropic, jev: httpx.AsyncClient, headers: dict[str, str]
) -> None:
    jev.headers.pop("Authorization")

    response = await jev.post("/v1/decide", json=ask(Question.IS_TASK), headers=headers)

    assert response.status_code == 401
    assert model.requests == []


async def test_unauthenticated_malformed_request_is_401_not_422(jev: httpx.AsyncClient) -> None:
    jev.headers.pop("Authorization")

    response = await jev.post("/v1/decide", content=b"{not json")

    assert response.status_code == 401


async def test_healthz_needs_no_key(jev: httpx.AsyncClient) -> None:
    jev.headers.pop("Authorization")

    response = await jev.get("/healthz")

    assert response.status_code == 200


async def test_no_key_with_the_local_development_flag_means_open(
    sdk: anthropic.AsyncAnthropic, model: FakeAnthropic
) -> None:
    model.push(ToolUse("answer_boolean", {"answer": True}))
    settings = JevSettings(jev_allow_no_key=True, _env_file=None)
    async with (
        serve(create_app(settings, provider=AnthropicChat(sdk, model="jev-model"))) as url,
        httpx.AsyncClient() as http,
    ):
        response = await http.post(f"{url}/v1/decide", json=ask(Question.IS_TASK))

    assert response.json() == {"answer": True}


@pytest.mark.parametrize(
    "body",
    [
        pytest.param({**ask(Question.IS_TASK), "question": "is_spam"}, id="unknown-question"),
        pytest.param({**ask(Question.IS_TASK), "kind": "probability"}, id="kind-mismatch"),
        pytest.param(ask(Question.STALE_KEEP), id="choice-without-options"),
        pytest.param(ask(Question.STALE_KEEP, options=[]), id="choice-empty-options"),
        pytest.param(ask(Question.STALE_KEEP, options=["keep", ""]), id="empty-option"),
        pytest.param(ask(Question.IS_TASK, options=["yes", "no"]), id="boolean-with-options"),
        pytest.param(ask(Question.IS_TASK, prompt=""), id="empty-prompt"),
        pytest.param({"question": "is_task", "kind": "boolean"}, id="missing-prompt"),
        pytest.param({**ask(Question.IS_TASK), "extra": 1}, id="unknown-field"),
        pytest.param([1, 2], id="not-an-object"),
    ],
)
async def test_malformed_request_is_422_without_a_model_call(
    model: FakeAnthropic, jev: httpx.AsyncClient, body: Any
) -> None:
    response = await jev.post("/v1/decide", json=body)

    assert response.status_code == 422
    assert model.requests == []


async def test_invalid_json_is_422(jev: httpx.AsyncClient) -> None:
    response = await jev.post(
        "/v1/decide", content=b"{not json", headers={"Content-Type": "application/json"}
    )

    assert response.status_code == 422


async def test_module_app_builds_from_the_environment(
    model: FakeAnthropic, monkeypatch: pytest.MonkeyPatch
) -> None:
    from app.jev.main import app

    model.push(ToolUse("answer_boolean", {"answer": True}))
    async with serve(model.app) as model_url:
        monkeypatch.setenv("ANTHROPIC_BASE_URL", model_url)
        monkeypatch.setenv("ANTHROPIC_API_KEY", "env-model-key")
        monkeypatch.setenv("JEV_MODEL", "env-jev-model")
        monkeypatch.setenv("JEV_API_KEY", "env-key")
        monkeypatch.delenv("DATABASE_URL", raising=False)
        monkeypatch.delenv("GATEWAY_TOKEN", raising=False)
        async with serve(app) as url, httpx.AsyncClient() as http:
            denied = await http.post(f"{url}/v1/decide", json=ask(Question.IS_TASK))
            allowed = await http.post(
                f"{url}/v1/decide",
                json=ask(Question.IS_TASK),
                headers={"Authorization": "Bearer env-key"},
            )

    assert denied.status_code == 401
    assert allowed.json() == {"answer": True}
    assert model.requests[0]["model"] == "env-jev-model"


# The same decider without the HTTP hop.


def in_process(sdk: anthropic.AsyncAnthropic, timeout_s: float = 0.5) -> ModelDecider:
    provider = AnthropicChat(sdk, model="jev-model", timeout_s=timeout_s)
    return ModelDecider(provider, model="jev-model", timeout_s=timeout_s)


async def test_in_process_decider_gives_the_same_answers(
    model: FakeAnthropic, sdk: anthropic.AsyncAnthropic
) -> None:
    model.push(
        ToolUse("answer_boolean", {"answer": True}),
        ToolUse("answer_probability", {"probability": 0.25}),
        ToolUse("answer_choice", {"choice": "😂"}),
    )
    decider = LoggedDecider(in_process(sdk))

    assert await decider.boolean(Question.EMOJI_ENOUGH, "thanks!") is True
    assert await decider.probability(Question.ADD_MEMORY, "x") == 0.25
    assert await decider.choice(Question.EMOJI_CHOICE, "lol", ["👍", "😂"]) == "😂"
    assert [r["tool_choice"]["name"] for r in model.requests] == [
        "answer_boolean",
        "answer_probability",
        "answer_choice",
    ]
    assert model.requests[2]["tools"][0]["input_schema"]["properties"]["choice"]["enum"] == [
        "👍",
        "😂",
    ]


@pytest.mark.parametrize(
    ("reply", "error", "reason"),
    [
        pytest.param(
            Failure(500, retry_after=FAST_RETRY), ModelFailed, NoAnswerReason.MODEL_FAILED, id="500"
        ),
        pytest.param(Failure(401), ModelFailed, NoAnswerReason.MODEL_FAILED, id="401"),
        pytest.param(
            Delay(LATE_S, Text("late")), ModelTimeout, NoAnswerReason.MODEL_TIMEOUT, id="timeout"
        ),
        pytest.param(
            ToolUse("answer_choice", {"choice": "archive"}),
            BadModelAnswer,
            NoAnswerReason.UNFIT,
            id="choice-outside-options",
        ),
        pytest.param(Text("keep"), BadModelAnswer, NoAnswerReason.UNFIT, id="text"),
    ],
)
async def test_in_process_failures_are_typed_errors_and_no_answer(
    model: FakeAnthropic,
    sdk: anthropic.AsyncAnthropic,
    reply: Any,
    error: type[Exception],
    reason: NoAnswerReason,
) -> None:
    model.default = reply
    decider = in_process(sdk)

    with pytest.raises(error) as caught:
        await decider.decide(Question.STALE_KEEP, "old memory", STALE_OPTIONS)
    assert caught.value.reason is reason  # type: ignore[attr-defined]
    assert await LoggedDecider(decider).choice(Question.STALE_KEEP, "x", STALE_OPTIONS) is None


async def test_an_answer_reports_the_tokens_its_model_spent(
    model: FakeAnthropic, jev: httpx.AsyncClient
) -> None:
    model.push(ToolUse("answer_probability", {"probability": 0.73}))

    response = await jev.post("/v1/decide", json=ask(Question.WORTH_KEEPING))

    assert response.json() == {"probability": 0.73}  # the body keeps the wire format's shape
    [served] = model.served
    assert tokens_of(response.headers) == served
