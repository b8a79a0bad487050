"""The decision model itself: one forced tool call to a small model (through a chat adapter,
Anthropic or OpenAI-compatible), strictly validated.

It never guesses: a failed call, a timeout or an answer that does not fit the request raise
a typed error. The decision service serves it over HTTP; with JEV_URL unset the bot asks it
in-process, without the HTTP hop."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from app.chat.base import (
    ChatAnswer,
    ChatFailed,
    ChatProvider,
    ChatRequest,
    Outcome,
    Purpose,
    Tool,
)
from app.decision.base import DecisionAnswer, NoAnswerReason, NoDecision
from app.decision.instructions import system_prompt
from app.decision.vocabulary import Kind, Question
from app.decision.wire import UnfitAnswer, fit_answer
from app.kit.spend import record_decision_tokens

# Room for one tool call with a short JSON input; the answer is never prose.
MAX_TOKENS = 256


class ModelFailed(NoDecision):
    reason = NoAnswerReason.MODEL_FAILED


class ModelTimeout(NoDecision):
    reason = NoAnswerReason.MODEL_TIMEOUT


class BadModelAnswer(NoDecision):
    reason = NoAnswerReason.UNFIT


def answer_tool(kind: Kind, options: Sequence[str] | None) -> Tool:
    """The one tool the model must call; its input is exactly the service's answer body."""
    prop: dict[str, Any]
    if kind is Kind.BOOLEAN:
        name, key, prop = "answer_boolean", "answer", {"type": "boolean"}
    elif kind is Kind.PROBABILITY:
        name, key = "answer_probability", "probability"
        prop = {"type": "number", "minimum": 0, "maximum": 1}
    else:
        name, key = "answer_choice", "choice"
        prop = {"type": "string", "enum": list(options or [])}
    return Tool(
        name=name,
        description="Give your answer to the question. Call this exactly once.",
        input_schema={
            "type": "object",
            "properties": {key: prop},
            "required": [key],
            "additionalProperties": False,
        },
    )


class ModelDecider:
    """Asks the model one closed question; raises ModelFailed / ModelTimeout / BadModelAnswer.
    Its tokens are the decision's (``record_decision_tokens``), not a chat purpose's."""

    def __init__(self, provider: ChatProvider, *, model: str, timeout_s: float) -> None:
        self._provider = provider
        self._model = model
        self._timeout_s = timeout_s

    def __repr__(self) -> str:
        return f"ModelDecider({self._provider!r}, model={self._model!r})"

    async def decide(
        self, question: Question, prompt: str, options: Sequence[str] | None
    ) -> DecisionAnswer:
        tool = answer_tool(question.kind, options)
        answer = await self._call(question, prompt, tool)
        record_decision_tokens(
            question.value,
            input_tokens=answer.usage.input_tokens,
            output_tokens=answer.usage.output_tokens,
        )
        calls = [c for c in answer.tool_calls if c.name == tool.name]
        if len(calls) != 1:
            raise BadModelAnswer(f"expected one {tool.name} call, got {len(calls)}")
        try:
            return fit_answer(question.kind, options, calls[0].input)
        except UnfitAnswer as exc:
            raise BadModelAnswer(f"tool input does not fit: {exc}") from None

    async def _call(self, question: Question, prompt: str, tool: Tool) -> ChatAnswer:
        request = ChatRequest(
            Purpose.DECISION,
            system=[system_prompt(question)],
            messages=[{"role": "user", "content": prompt}],
            max_tokens=MAX_TOKENS,
            tools=[tool],
            force_tool=tool.name,
            model=self._model,
        )
        try:
            # The adapter's own timeout bounds each attempt; this bounds attempts plus retries.
            async with asyncio.timeout(self._timeout_s):
                return await self._provider.complete(request)
        except TimeoutError:
            raise ModelTimeout("decision model timed out") from None
        except ChatFailed as exc:
            if exc.outcome == Outcome.TIMEOUT:
                raise ModelTimeout("decision model timed out") from None
            raise ModelFailed(f"decision model call failed: {exc.outcome}") from None
