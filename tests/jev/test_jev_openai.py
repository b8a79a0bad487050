"""The decision service with JEV_PROVIDER=openai against FakeOpenAI (the real SDK, the real
wire): a forced function call, or a JSON schema on a server without tool calling, strictly
parsed; the CONTRACT's answers and status codes unchanged."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest

from app.chat.fake import Delay, Failure, Text, ToolUse
from app.chat.fake_openai import FakeOpenAI, Malformed
from app.decision.vocabulary import STALE_OPTIONS, Question
from app.jev.main import create_app
from app.jev.settings import JevSettings
from tests.jev.asking import ask
from tests.support.servers import serve

KEY = "jev-test-key"
AUTH = {"Authorization": f"Bearer {KEY}"}
FAST_RETRY = 0.01

# The service's whole budget for one decision: long enough that a loaded machine never turns a
# quick answer (or one SDK retry) into a timeout (at 0.5 s one did, in CI); a late answer comes
# well after it.
JEV_TIMEOUT_S = 2.0
LATE_S = JEV_TIMEOUT_S + 2.0


@pytest.fixture
def model() -> FakeOpenAI:
    return FakeOpenAI()


@pytest.fixture
async def jev(model: FakeOpenAI) -> AsyncIterator[httpx.AsyncClient]:
    async with serve(model.app) as model_url:
        settings = JevSettings(
            jev_provider="openai",
            jev_model="local-small",
            jev_api_key=KEY,
            jev_timeout_s=JEV_TIMEOUT_S,
            jev_max_retries=1,
            openai_base_url=f"{model_url}/v1",
            openai_api_key="model-key",
            _env_file=None,
        )
        async with (
            serve(create_app(settings)) as url,
            httpx.AsyncClient(base_url=url, headers=AUTH) as client,
        ):
            yield client


async def test_a_boolean_is_a_forced_function_call(
    model: FakeOpenAI, jev: httpx.AsyncClient
) -> None:
    model.push(ToolUse("answer_boolean", {"answer": True}))

    response = await jev.post("/v1/decide", json=ask(Question.IS_CORRECTION, "no, Tuesday"))

    assert (response.status_code, response.json()) == (200, {"answer": True})
    [sent] = model.wire
    assert sent["model"] == "local-small"
    assert sent["tool_choice"] == {"type": "function", "function": {"name": "answer_boolean"}}
    assert sent["messages"][-1] == {"role": "user", "content": "no, Tuesday"}


async def test_a_server_without_tools_answers_under_a_json_schema(
    model: FakeOpenAI, jev: httpx.AsyncClient
) -> None:
    model.tools = False
    model.push(Text('{"choice": "keep"}'), Text('{"choice": "delete"}'))
    options = list(STALE_OPTIONS)

    first = await jev.post("/v1/decide", json=ask(Question.STALE_KEEP, options=options))
    second = await jev.post("/v1/decide", json=ask(Question.STALE_KEEP, options=options))

    assert (first.json(), second.json()) == ({"choice": "keep"}, {"choice": "delete"})
    refused, *structured = model.wire
    assert "tools" in refused and len(structured) == 2  # refused once, then the schema at once
    for sent in structured:
        assert "tools" not in sent
        schema = sent["response_format"]["json_schema"]["schema"]
        assert schema["properties"]["choice"]["enum"] == options


@pytest.mark.parametrize(
    "reply",
    [
        pytest.param(Text('{"choice": "archive"}'), id="outside-options"),
        pytest.param(Text("keep, I think"), id="not-json"),
        pytest.param(Text('["keep"]'), id="not-an-object"),
    ],
)
async def test_an_unfit_structured_answer_is_502(
    model: FakeOpenAI, jev: httpx.AsyncClient, reply: Text
) -> None:
    model.tools = False
    model.push(reply)

    response = await jev.post(
        "/v1/decide", json=ask(Question.STALE_KEEP, options=list(STALE_OPTIONS))
    )

    assert response.status_code == 502


@pytest.mark.parametrize("status", [400, 401, 500])
async def test_a_model_error_is_502(model: FakeOpenAI, jev: httpx.AsyncClient, status: int) -> None:
    model.default = Failure(status, retry_after=FAST_RETRY)

    response = await jev.post("/v1/decide", json=ask(Question.IS_TASK))

    assert response.status_code == 502


async def test_rate_limited_once_then_answering_is_200(
    model: FakeOpenAI, jev: httpx.AsyncClient
) -> None:
    model.push(Failure(429, retry_after=FAST_RETRY), ToolUse("answer_boolean", {"answer": False}))

    response = await jev.post("/v1/decide", json=ask(Question.IS_TASK))

    assert response.json() == {"answer": False}


async def test_a_timeout_is_504(model: FakeOpenAI, jev: httpx.AsyncClient) -> None:
    model.push(Delay(LATE_S, ToolUse("answer_boolean", {"answer": True})))

    response = await jev.post("/v1/decide", json=ask(Question.IS_TASK))

    assert response.status_code == 504


async def test_a_malformed_answer_is_502(model: FakeOpenAI, jev: httpx.AsyncClient) -> None:
    model.push(Malformed())

    response = await jev.post("/v1/decide", json=ask(Question.IS_TASK))

    assert response.status_code == 502


async def test_the_module_app_builds_the_openai_provider_from_the_environment(
    model: FakeOpenAI, monkeypatch: pytest.MonkeyPatch
) -> None:
    from app.jev.main import app

    model.push(ToolUse("answer_boolean", {"answer": True}))
    async with serve(model.app) as model_url:
        monkeypatch.setenv("JEV_PROVIDER", "openai")
        monkeypatch.setenv("OPENAI_BASE_URL", f"{model_url}/v1")
        monkeypatch.delenv("OPENAI_API_KEY", raising=False)  # a local server needs none
        monkeypatch.setenv("JEV_MODEL", "env-local-model")
        monkeypatch.setenv("JEV_API_KEY", "env-key")
        async with serve(app) as url, httpx.AsyncClient() as http:
            allowed = await http.post(
                f"{url}/v1/decide",
                json=ask(Question.IS_TASK),
                headers={"Authorization": "Bearer env-key"},
            )

    assert allowed.json() == {"answer": True}
    assert model.wire[0]["model"] == "env-local-model"


def test_jev_provider_openai_without_a_model_is_refused() -> None:
    with pytest.raises(ValueError, match="JEV_MODEL"):
        JevSettings(jev_provider="openai", jev_api_key=KEY, _env_file=None)
