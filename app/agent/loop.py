"""The bounded tool loop: at most N model calls in the time budget, then an answer or nothing."""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import httpx

from app.agent.prompt import TaskRequest, final_text, system_blocks, task_message
from app.agent.sandbox.docker import DockerSandbox
from app.agent.store import Message, SessionStore, flatten
from app.agent.tools import MIN_TOOL_S, Toolbox
from app.chat.base import (
    ChatFailed,
    ChatModel,
    ChatRequest,
    OverBudget,
    Purpose,
    Stop,
    Tool,
    ToolCall,
)
from app.kit.logs import log_context

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class AgentLimits:
    max_steps: int = 8  # model calls per task
    total_s: float = 75.0  # the hosting ARQ job times out at 100 s; a caller's budget may cut it
    max_tokens: int = 1024
    # Tool calls leave this much of the budget for the model call that writes the answer.
    answer_reserve_s: float = 10.0
    min_tool_s: float = MIN_TOOL_S  # a tool call that would get less is not started


def time_limit(total_s: float, budget_s: float | None) -> float:
    """The task's whole time: the configured total, cut to the caller's budget if smaller."""
    return total_s if budget_s is None else min(total_s, budget_s)


class TaskAgent:
    def __init__(
        self,
        chat: ChatModel,
        toolbox: Toolbox,
        store: SessionStore,
        *,
        model: str,
        limits: AgentLimits | None = None,
        sandbox: DockerSandbox | None = None,
        owned_http: httpx.AsyncClient | None = None,
    ) -> None:
        self._chat = chat
        self._toolbox = toolbox
        self._store = store
        self._model = model
        self._limits = limits or AgentLimits()
        self._docker = sandbox
        self._owned_http = owned_http

    async def run(self, request: TaskRequest, budget_s: float | None = None) -> str | None:
        """The agent's one Discord message, or None so the turn writes its normal reply.
        Every step is a metered call checked against the payer's budget: OverBudget (raised)
        stops the task, and the turn answers with the budget's notice.

        ``budget_s``: the time the caller can still give (its job's remaining time less what
        it needs afterwards); the whole loop, every model and tool call included, fits in
        the smaller of it and ``AgentLimits.total_s``."""
        started = time.monotonic()
        limit_s = time_limit(self._limits.total_s, budget_s)
        with log_context(channel_id=request.channel_id):
            if limit_s <= 0:
                log.warning("task agent skipped: no time left", extra={"limit_s": limit_s})
                return None
            try:
                async with asyncio.timeout(limit_s):
                    answer = await self._run(request, started + limit_s)
            except TimeoutError:
                log.warning("task agent timed out", extra={"limit_s": limit_s})
                return None
            except OverBudget:
                log.info("task agent stopped: daily token budget spent")
                raise
            except ChatFailed as exc:
                log.warning("task agent model call failed", extra={"error": exc.outcome})
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
        """Stop and remove idle docker sandboxes and remove stopped leftovers (the worker
        calls this every minute); the channel ids removed, [] without docker."""
        return await self._docker.stop_idle(now) if self._docker is not None else []

    async def aclose(self) -> None:
        """Close the Docker Engine client this agent opened (worker shutdown)."""
        if self._owned_http is not None:
            await self._owned_http.aclose()

    async def _run(self, request: TaskRequest, deadline: float) -> str | None:
        earlier = flatten(await self._store.load(request.channel_id))
        turn: list[Message] = [{"role": "user", "content": task_message(request)}]
        for _ in range(self._limits.max_steps):
            answer = await self._chat.complete(
                ChatRequest(
                    Purpose.TASK,
                    system=system_blocks(request.persona),
                    messages=[*earlier, *turn],
                    max_tokens=self._limits.max_tokens,
                    tools=[
                        Tool(**spec) for spec in self._toolbox.specs(request.requester_is_staff)
                    ],
                    model=request.model or self._model,
                )
            )
            content = answer.blocks()
            if not answer.tool_calls:
                return await self._finish(request, turn, content, answer.stop)
            turn.append({"role": "assistant", "content": content})
            results = await self._results(request, answer.tool_calls, deadline)
            turn.append({"role": "user", "content": results})
        log.warning("task agent hit the step cap", extra={"max_steps": self._limits.max_steps})
        return None

    async def _finish(
        self,
        request: TaskRequest,
        turn: list[Message],
        content: list[dict[str, Any]],
        stop: Stop,
    ) -> str | None:
        text = final_text(content)
        if not text or stop is Stop.MAX_TOKENS:  # nothing, or an answer cut mid-way
            log.warning("task agent gave no usable text", extra={"stop_reason": stop.value})
            return None
        turn.append({"role": "assistant", "content": [{"type": "text", "text": text}]})
        # The session keeps the request with its attachments named, not their bytes or text.
        kept = [{"role": "user", "content": task_message(request, with_content=False)}, *turn[1:]]
        try:
            await self._store.append(
                request.channel_id, kept, authors=request.author_ids, since=request.since
            )
        except Exception:
            # The answer is good; only the next task's memory of it is lost.
            log.exception("task agent session save failed")
        return text

    async def _results(
        self, request: TaskRequest, calls: tuple[ToolCall, ...], deadline: float
    ) -> list[dict[str, Any]]:
        results = []
        for call in calls:
            args = call.input
            outcome = await self._toolbox.call(
                request.channel_id,
                call.name,
                args,
                requester_is_staff=request.requester_is_staff,
                time_left_s=deadline - time.monotonic() - self._limits.answer_reserve_s,
            )
            result: dict[str, Any] = {
                "type": "tool_result",
                "tool_use_id": call.id,
                "content": outcome.text,
            }
            if outcome.is_error:
                result["is_error"] = True
            results.append(result)
        return results
