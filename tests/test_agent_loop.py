"""The task agent's loop against a local fake Anthropic and a local fake Jina, on real Postgres."""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import anthropic
import httpx
import httpx2
import pytest
from pydantic import SecretStr

from app.agent import AgentLimits, TaskAgent, TaskRequest, build_agent
from app.agent.fake_docker import ExecOutput, FakeDocker
from app.agent.fake_jina import FakeJina
from app.chat.fake import Delay, Failure, FakeAnthropic, Text, ToolUse
from app.config import SandboxBackend, Settings
from app.db import SessionFactory
from app.kit.clock import utcnow
from tests.support.servers import serve

PERSONA = "You are Mika, the channel's friendly companion."
HOSTS = {"example.com": ["93.184.216.34"], "internal.test": ["10.0.0.1"]}


async def fake_resolver(host: str) -> list[str]:
    if host not in HOSTS:
        raise OSError(f"unknown host {host}")
    return HOSTS[host]


@dataclass
class Rig:
    model: FakeAnthropic
    jina: FakeJina
    settings: Settings
    sessions: SessionFactory
    client: anthropic.AsyncAnthropic
    http: httpx.AsyncClient

    def agent(
        self,
        limits: AgentLimits | None = None,
        docker_http: httpx.AsyncClient | None = None,
        **overrides: Any,
    ) -> TaskAgent:
        settings = self.settings.model_copy(update=overrides)
        return build_agent(
            settings,
            anthropic=self.client,
            http=self.http,
            sessions=self.sessions,
            docker_http=docker_http,
            resolve=fake_resolver,
            limits=limits,
        )


@pytest.fixture
async def rig(settings: Settings, sessions: SessionFactory) -> AsyncIterator[Rig]:
    model, jina = FakeAnthropic(), FakeJina()
    async with serve(model.app) as model_url, serve(jina.app) as jina_url:
        configured = settings.model_copy(
            update={
                "jina_api_key": SecretStr(jina.api_key),
                "jina_search_url": f"{jina_url}/search",
                "jina_reader_url": f"{jina_url}/reader",
                "sandbox_backend": SandboxBackend.NONE,
                # The SDK warns on deprecated names (an error under filterwarnings).
                "chat_model": "claude-task-test",
            }
        )
        async with httpx.AsyncClient() as http, httpx2.AsyncClient() as sdk_http:
            client = anthropic.AsyncAnthropic(
                base_url=model_url, api_key="test", http_client=sdk_http, max_retries=0
            )
            yield Rig(model, jina, configured, sessions, client, http)


def task(channel_id: int = 1, request: str = "find the Python 3.13 release date") -> TaskRequest:
    return TaskRequest(
        channel_id=channel_id,
        requester_name="Ana",
        request=request,
        recent_lines=[f"Bo: line {i}" for i in range(12)],
        persona=PERSONA,
    )


def last_tool_result(body: dict[str, Any]) -> dict[str, Any]:
    last = body["messages"][-1]
    assert last["role"] == "user"
    (result,) = [b for b in last["content"] if b["type"] == "tool_result"]
    return result


async def test_search_then_answer_returns_the_final_text(rig: Rig) -> None:
    rig.jina.results["python 3.13 release"] = "Python 3.13.0 was released on 2024-10-07."
    rig.model.push(
        ToolUse("web_search", {"query": "python 3.13 release"}),
        Text("Python 3.13 came out on 7 October 2024."),
    )

    answer = await rig.agent().run(task())

    assert answer == "Python 3.13 came out on 7 October 2024."
    (call,) = rig.jina.requests
    assert (call.kind, call.target) == ("search", "python 3.13 release")
    assert call.authorization == f"Bearer {rig.jina.api_key}"
    result = last_tool_result(rig.model.requests[1])
    assert "released on 2024-10-07" in result["content"]
    assert not result.get("is_error")


async def test_every_call_carries_the_persona_and_the_seed_task_message(rig: Rig) -> None:
    rig.jina.results["q"] = "r"
    rig.model.push(ToolUse("web_search", {"query": "q"}), Text("done"))

    await rig.agent().run(task())

    assert len(rig.model.requests) == 2
    for body in rig.model.requests:
        assert body["system"][-1]["text"] == PERSONA
        assert "no preamble" in body["system"][0]["text"]
        assert {t["name"] for t in body["tools"]} == {"web_search", "read_page"}
    first = rig.model.requests[0]["messages"]
    assert len(first) == 1
    text = first[0]["content"]
    assert "Bo: line 2\n" in text and "Bo: line 11" in text and "Bo: line 1\n" not in text
    assert text.endswith("Ana asked you to do this: find the Python 3.13 release date")


async def test_read_page_then_answer(rig: Rig) -> None:
    rig.jina.pages["https://example.com/notes?id=3"] = "The meeting moved to Friday."
    rig.model.push(
        ToolUse("read_page", {"url": "https://example.com/notes?id=3"}),
        Text("It moved to Friday."),
    )

    answer = await rig.agent().run(task(request="what does that page say?"))

    assert answer == "It moved to Friday."
    (call,) = rig.jina.requests
    assert (call.kind, call.target) == ("read", "https://example.com/notes?id=3")
    assert last_tool_result(rig.model.requests[1])["content"] == "The meeting moved to Friday."


async def test_long_results_are_cut_to_eight_thousand_characters(rig: Rig) -> None:
    rig.jina.pages["https://example.com/long"] = "x" * 20_000
    rig.model.push(ToolUse("read_page", {"url": "https://example.com/long"}), Text("long"))

    await rig.agent().run(task())

    content = last_tool_result(rig.model.requests[1])["content"]
    assert len(content) == 8000
    assert content.endswith("[… cut at 8,000 characters]")


@pytest.mark.parametrize(
    "url",
    [
        "file:///etc/passwd",
        "http://127.0.0.1/admin",
        "http://169.254.169.254/latest/meta-data/",
        "http://[::1]:8080/",
        "http://metadata.google.internal/computeMetadata/v1/",
        "http://internal.test/",  # the resolver maps it to 10.0.0.1
    ],
)
async def test_refused_url_is_a_tool_error_and_never_fetched(rig: Rig, url: str) -> None:
    rig.model.push(ToolUse("read_page", {"url": url}), Text("I could not read that page."))

    answer = await rig.agent().run(task())

    assert answer == "I could not read that page."
    result = last_tool_result(rig.model.requests[1])
    assert result["is_error"] is True
    assert result["content"].startswith("refused")
    assert rig.jina.requests == []


async def test_jina_failure_is_a_tool_error(rig: Rig) -> None:
    rig.model.push(ToolUse("read_page", {"url": "https://example.com/missing"}), Text("gone"))

    assert await rig.agent().run(task()) == "gone"

    result = last_tool_result(rig.model.requests[1])
    assert result["is_error"] is True
    assert result["content"] == "read failed: HTTP 404"


async def test_the_jina_key_never_reaches_the_model(rig: Rig) -> None:
    rig.jina.api_key = "jina-very-secret"
    rig.model.push(ToolUse("web_search", {"query": "q"}), Text("done"))
    agent = rig.agent(jina_api_key=SecretStr("wrong-key"))

    await agent.run(task())

    assert rig.jina.requests[0].authorization == "Bearer wrong-key"
    assert "wrong-key" not in json.dumps(rig.model.requests)
    assert last_tool_result(rig.model.requests[1])["content"] == "search failed: HTTP 401"


async def test_step_cap_reached_returns_none(rig: Rig) -> None:
    rig.jina.results["again"] = "more"
    rig.model.default = ToolUse("web_search", {"query": "again"})

    answer = await rig.agent(AgentLimits(max_steps=3)).run(task())

    assert answer is None
    assert len(rig.model.requests) == 3


async def test_persistent_model_failure_returns_none(rig: Rig) -> None:
    rig.model.default = Failure(500)

    assert await rig.agent().run(task()) is None
    assert len(rig.model.requests) == 1


async def test_failure_after_a_tool_call_returns_none(rig: Rig) -> None:
    rig.jina.results["q"] = "r"
    rig.model.push(ToolUse("web_search", {"query": "q"}), Failure(529))

    assert await rig.agent().run(task()) is None


async def test_total_time_cap_returns_none(rig: Rig) -> None:
    rig.model.push(Delay(1.5, Text("too late")))
    started = time.monotonic()

    answer = await rig.agent(AgentLimits(total_s=0.2)).run(task())

    assert answer is None
    assert time.monotonic() - started < 1.0


async def test_empty_text_returns_none(rig: Rig) -> None:
    rig.model.push(Text("   "))

    assert await rig.agent().run(task()) is None


async def test_follow_up_in_the_same_channel_continues_the_session(rig: Rig) -> None:
    rig.jina.results["q"] = "result text"
    rig.model.push(ToolUse("web_search", {"query": "q"}), Text("first answer"))
    agent = rig.agent()
    assert await agent.run(task(channel_id=7, request="first task")) == "first answer"

    rig.model.push(Text("second answer"))
    assert await agent.run(task(channel_id=7, request="follow up")) == "second answer"

    messages = rig.model.requests[2]["messages"]
    assert [m["role"] for m in messages] == ["user", "assistant", "user", "assistant", "user"]
    assert messages[0]["content"].endswith("Ana asked you to do this: first task")
    assert messages[1]["content"][0]["type"] == "tool_use"
    assert messages[2]["content"][0]["content"] == "result text"
    assert messages[3]["content"] == [{"type": "text", "text": "first answer"}]
    assert messages[4]["content"].endswith("Ana asked you to do this: follow up")


async def test_another_channel_starts_a_fresh_session(rig: Rig) -> None:
    rig.model.push(Text("first answer"))
    agent = rig.agent()
    await agent.run(task(channel_id=7))

    rig.model.push(Text("other channel"))
    await agent.run(task(channel_id=8, request="unrelated"))

    messages = rig.model.requests[1]["messages"]
    assert len(messages) == 1
    assert messages[0]["content"].endswith("Ana asked you to do this: unrelated")


async def test_a_failed_run_leaves_the_session_unchanged(rig: Rig) -> None:
    agent = rig.agent()
    rig.model.push(Text("kept"), Failure(500))
    await agent.run(task(channel_id=9, request="one"))
    assert await agent.run(task(channel_id=9, request="two")) is None

    rig.model.push(Text("three"))
    await agent.run(task(channel_id=9, request="three"))

    contents = [m["content"] for m in rig.model.requests[2]["messages"]]
    assert len(contents) == 3
    assert "two" not in json.dumps(contents)


async def test_run_command_is_offered_and_runs_in_the_local_sandbox(
    rig: Rig, tmp_path: Path
) -> None:
    rig.model.push(
        ToolUse("run_command", {"command": "echo hi > f.txt && cat f.txt && pwd"}),
        Text("it printed hi"),
    )
    agent = rig.agent(sandbox_backend=SandboxBackend.LOCAL, sandbox_root=str(tmp_path))

    assert await agent.run(task(channel_id=11)) == "it printed hi"

    assert "run_command" in {t["name"] for t in rig.model.requests[0]["tools"]}
    content = last_tool_result(rig.model.requests[1])["content"]
    assert content == f"exit code: 0\nhi\n{tmp_path / '11'}\n"


async def test_run_command_goes_to_the_channels_docker_sandbox(rig: Rig) -> None:
    docker = FakeDocker(exec_handler=lambda cmd: ExecOutput(b"Linux\n"))
    rig.model.push(ToolUse("run_command", {"command": "uname"}), Text("It is Linux."))
    async with serve(docker.app) as url, httpx.AsyncClient(base_url=url) as docker_http:
        agent = rig.agent(docker_http=docker_http, sandbox_backend=SandboxBackend.DOCKER)

        assert await agent.run(task(channel_id=12)) == "It is Linux."
        assert await agent.stop_idle(utcnow() + timedelta(minutes=6)) == [12]

    assert last_tool_result(rig.model.requests[1])["content"] == "exit code: 0\nLinux\n"
    assert [spec["Labels"]["companion.channel"] for spec in docker.created] == ["12"]
    assert docker.containers == {}  # idle: stopped and removed
