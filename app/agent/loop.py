"""The bounded tool loop: at most N model calls and T seconds, then an answer or nothing."""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import anthropic
import httpx
from anthropic.types import ContentBlock, ToolUseBlock

from app.agent.prompt import TaskRequest, final_text, system_blocks, task_message
from app.agent.sandbox.docker import DockerSandbox
from app.agent.session import Message, SessionStore, flatten
from app.agent.tools import Toolbox
from app.kit.logs import log_context

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class AgentLimits:
    max_steps: int = 8  # model calls per task
    total_s: float = 75.0  # the hosting ARQ job times out at 100 s
    max_tokens: int = 1024


def block_dict(block: ContentBlock) -> dict[str, Any] | None:
    """An assistant content block as plain JSON to send back and store; others dropped."""
    if block.type == "text":
        return {"type": "text", "text": block.text}
    if block.type == "tool_use":
        return {"type": "tool_use", "id": block.id, "name": block.name, "input": block.input}
    return None


class TaskAgent:
    def __init__(
        self,
        client: anthropic.AsyncAnthropic,
        toolbox: Toolbox,
        store: SessionStore,
        *,
        model: str,
        limits: AgentLimits | None = None,
        sandbox: DockerSandbox | None = None,
        owned_http: httpx.AsyncClient | None = None,
    ) -> None:
        self._client = client
        self._toolbox = toolbox
        self._store = store
        self._model = model
        self._limits = limits or AgentLimits()
        self._docker = sandbox
        self._owned_http = owned_http

    async def run(self, request: TaskRequest) -> str | None:
        """The agent's one Discord message, or None so the turn writes its normal reply."""
        started = time.monotonic()
        with log_context(channel_id=request.channel_id):
            try:
                async with asyncio.timeout(self._limits.total_s):
                    answer = await self._run(request)
            except TimeoutError:
                log.warning("task agent timed out", extra={"limit_s": self._limits.total_s})
                return None
            except anthropic.APIError as exc:
                log.warning("task agent model call failed", extra={"error": type(exc).__name__})
                return None
            except Exception:
                # The member must still get the written reply, whatever broke here.
                log.exception("task agent failed")
                return None
            log.info(
                "task agent finished",
                extra={"answered": answer is not None, "seconds": time.monotonic() - started},
            )
            return answer

    async def stop_idle(self, now: datetime) -> list[int]:
        """Stop idle docker sandboxes (the worker calls this every minute); [] otherwise."""
        return await self._docker.stop_idle(now) if self._docker is not None else []

    async def aclose(self) -> None:
        """Close the Docker Engine client this agent opened (worker shutdown)."""
        if self._owned_http is not None:
            await self._owned_http.aclose()

    async def _run(self, request: TaskRequest) -> str | None:
        earlier = flatten(await self._store.load(request.channel_id))
        turn: list[Message] = [{"role": "user", "content": task_message(request)}]
        for _ in range(self._limits.max_steps):
            response = await self._client.messages.create(
                model=self._model,
                max_tokens=self._limits.max_tokens,
                system=system_blocks(request.persona),  # type: ignore[arg-type]
                messages=[*earlier, *turn],  # type: ignore[list-item]
                tools=self._toolbox.specs(),  # type: ignore[arg-type]
            )
            content = [d for d in map(block_dict, response.content) if d is not None]
            calls = [b for b in response.content if isinstance(b, ToolUseBlock)]
            if not calls:
                return await self._finish(request.channel_id, turn, content, response.stop_reason)
            turn.append({"role": "assistant", "content": content})
            turn.append({"role": "user", "content": await self._results(request, calls)})
        log.warning("task agent hit the step cap", extra={"max_steps": self._limits.max_steps})
        return None

    async def _finish(
        self,
        channel_id: int,
        turn: list[Message],
        content: list[dict[str, Any]],
        stop_reason: str | None,
    ) -> str | None:
        text = final_text(content)
        if not text or stop_reason == "max_tokens":  # nothing, or an answer cut mid-way
            log.warning("task agent gave no usable text", extra={"stop_reason": stop_reason})
            return None
        turn.append({"role": "assistant", "content": [{"type": "text", "text": text}]})
        try:
            await self._store.append(channel_id, turn)
        except Exception:
            # The answer is good; only the next task's memory of it is lost.
            log.exception("task agent session save failed")
        return text

    async def _results(
        self, request: TaskRequest, calls: list[ToolUseBlock]
    ) -> list[dict[str, Any]]:
        results = []
        for call in calls:
            args = call.input if isinstance(call.input, dict) else {}
            outcome = await self._toolbox.call(request.channel_id, call.name, args)
            result: dict[str, Any] = {
                "type": "tool_result",
                "tool_use_id": call.id,
                "content": outcome.text,
            }
            if outcome.is_error:
                result["is_error"] = True
            results.append(result)
        return results
