"""The task agent's tools: web_search and read_page through Jina, run_command in the sandbox."""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import httpx
from prometheus_client import Counter, Histogram
from pydantic import SecretStr

from app.agent.sandbox.base import COMMAND_TIMEOUT_S, CommandResult, Sandbox, SandboxError
from app.agent.urls import RefusedURL, Resolver, check_url, system_resolver

log = logging.getLogger(__name__)

WEB_TIMEOUT_S = 30.0
RESULT_CHARS = 8000
CUT_MARKER = "\n[… cut at 8,000 characters]"

TOOL_CALLS = Counter("agent_tool_calls_total", "Task-agent tool calls", ["tool", "outcome"])
TOOL_SECONDS = Histogram(
    "agent_tool_seconds",
    "Task-agent tool call duration",
    ["tool"],
    buckets=(0.1, 0.5, 1, 2, 5, 10, 20, 30, 60, 90),
)

WEB_SEARCH = {
    "name": "web_search",
    "description": "Search the web. Returns the top results as text (titles, URLs, snippets).",
    "input_schema": {
        "type": "object",
        "properties": {"query": {"type": "string", "description": "What to search for."}},
        "required": ["query"],
    },
}
READ_PAGE = {
    "name": "read_page",
    "description": "Read a public web page (http or https) and return its main text.",
    "input_schema": {
        "type": "object",
        "properties": {"url": {"type": "string", "description": "The page's full URL."}},
        "required": ["url"],
    },
}
RUN_COMMAND = {
    "name": "run_command",
    "description": (
        "Run a shell command with `bash -lc` in this channel's sandbox (Linux, working "
        "directory /workspace, files kept while the sandbox runs, internet access). "
        "60-second limit; returns the exit code and the last 4,000 characters of output."
    ),
    "input_schema": {
        "type": "object",
        "properties": {"command": {"type": "string", "description": "The shell command."}},
        "required": ["command"],
    },
}


@dataclass(frozen=True, slots=True)
class ToolOutcome:
    text: str
    is_error: bool = False


class ToolError(Exception):
    """The tool could not do its job; the message is safe to show the model."""


def truncate(text: str, limit: int = RESULT_CHARS) -> str:
    """At most ``limit`` characters, ending with a marker when anything was cut."""
    if len(text) <= limit:
        return text
    return text[: limit - len(CUT_MARKER)] + CUT_MARKER


def describe_command(result: CommandResult, timeout_s: float) -> str:
    if result.timed_out:
        head = f"timed out after {timeout_s:g} s (process killed)"
    else:
        head = f"exit code: {result.exit_code}"
    cut = "[… earlier output cut]\n" if result.truncated else ""
    return f"{head}\n{cut}{result.output}" if result.output else f"{head}\n(no output)"


class JinaClient:
    """Jina search and reader. The key goes only into the Authorization header."""

    def __init__(
        self,
        http: httpx.AsyncClient,
        *,
        search_url: str,
        reader_url: str,
        api_key: SecretStr | None,
    ) -> None:
        self._http = http
        self._search_url = search_url.rstrip("/")
        self._reader_url = reader_url.rstrip("/")
        self._api_key = api_key

    async def search(self, query: str) -> str:
        return await self._get(f"{self._search_url}/", params={"q": query}, what="search")

    async def read(self, url: str) -> str:
        return await self._get(f"{self._reader_url}/{url}", params=None, what="read")

    async def _get(self, url: str, *, params: dict[str, str] | None, what: str) -> str:
        headers = {"Accept": "text/plain"}
        if self._api_key is not None:
            headers["Authorization"] = f"Bearer {self._api_key.get_secret_value()}"
        try:
            response = await self._http.get(
                url, params=params, headers=headers, timeout=WEB_TIMEOUT_S
            )
        except httpx.HTTPError as exc:
            raise ToolError(f"{what} failed: {type(exc).__name__}") from None
        if response.status_code != 200:
            raise ToolError(f"{what} failed: HTTP {response.status_code}")
        return response.text


class Toolbox:
    def __init__(
        self,
        jina: JinaClient,
        sandbox: Sandbox | None,
        *,
        resolve: Resolver = system_resolver,
        command_timeout_s: float = COMMAND_TIMEOUT_S,
    ) -> None:
        self._jina = jina
        self._sandbox = sandbox
        self._resolve = resolve
        self._command_timeout_s = command_timeout_s

    def specs(self) -> list[dict[str, Any]]:
        """The tool list the model sees; run_command only when a sandbox is configured."""
        tools = [WEB_SEARCH, READ_PAGE]
        return [*tools, RUN_COMMAND] if self._sandbox is not None else tools

    async def call(self, channel_id: int, name: str, args: Mapping[str, Any]) -> ToolOutcome:
        """Run one tool call; every failure becomes an error result for the model."""
        started = time.monotonic()
        outcome, label = await self._dispatch(channel_id, name, args)
        elapsed = time.monotonic() - started
        tool = name if name in ("web_search", "read_page", "run_command") else "unknown"
        TOOL_CALLS.labels(tool=tool, outcome=label).inc()
        TOOL_SECONDS.labels(tool=tool).observe(elapsed)
        log.info(
            "agent tool call",
            extra={"tool": tool, "outcome": label, "duration_ms": round(elapsed * 1000)},
        )
        return outcome

    async def _dispatch(
        self, channel_id: int, name: str, args: Mapping[str, Any]
    ) -> tuple[ToolOutcome, str]:
        try:
            if name == "web_search":
                text = truncate(await self._jina.search(_arg(args, "query")))
            elif name == "read_page":
                url = _arg(args, "url")
                await check_url(url, self._resolve)
                text = truncate(await self._jina.read(url.strip()))
            elif name == "run_command" and self._sandbox is not None:
                text = await self._run(channel_id, _arg(args, "command"))
            else:
                return ToolOutcome(f"unknown tool: {name}", is_error=True), "error"
        except RefusedURL as exc:
            return ToolOutcome(f"refused: {exc}", is_error=True), "refused"
        except (ToolError, SandboxError) as exc:
            return ToolOutcome(str(exc), is_error=True), "error"
        except Exception as exc:
            # A bug in one tool costs that call, not the member's whole task.
            log.exception("agent tool crashed", extra={"tool": name})
            return ToolOutcome(f"{name} failed: {type(exc).__name__}", is_error=True), "error"
        return ToolOutcome(text or "(empty result)"), "ok"

    async def _run(self, channel_id: int, command: str) -> str:
        assert self._sandbox is not None
        result = await self._sandbox.run(channel_id, command, self._command_timeout_s)
        return describe_command(result, self._command_timeout_s)


def _arg(args: Mapping[str, Any], key: str) -> str:
    value = args.get(key)
    if not isinstance(value, str) or not value.strip():
        raise ToolError(f"missing or empty '{key}'")
    return value
