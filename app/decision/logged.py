"""Every decision, in either mode, is logged, counted and added to the spend scope here."""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence

from prometheus_client import Counter, Histogram

from app.decision.base import (
    AnswerSource,
    DecisionAnswer,
    NoAnswerReason,
    NoDecision,
    expect_kind,
)
from app.decision.vocabulary import Kind, Question
from app.kit.spend import record_decision

log = logging.getLogger("app.decision")

DECISION_CALLS = Counter(
    "decision_calls_total",
    "Decision-model calls by question and outcome (answered, or why there was no answer).",
    ["question", "outcome"],
)
DECISION_LATENCY = Histogram(
    "decision_latency_seconds",
    "Decision-model call latency, answered or not.",
    ["question"],
    buckets=(0.05, 0.1, 0.25, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0),
)

ANSWERED = "answered"


class LoggedDecider:
    """The Decider the bot uses: asks ``source`` and records the question id, latency and the
    answer or the failure kind. The prompt is logged only at debug level.

    The kind always comes from the Question, so a boolean question cannot be asked as a
    choice, and the answer's type is checked once more so "no" and "no answer" never blur."""

    def __init__(self, source: AnswerSource) -> None:
        self._source = source

    def __repr__(self) -> str:
        return f"LoggedDecider({self._source!r})"

    async def _answer(
        self, question: Question, prompt: str, options: Sequence[str] | None
    ) -> DecisionAnswer | None:
        started = time.perf_counter()
        answer: DecisionAnswer | None = None
        detail = ""
        try:
            answer = await self._source.decide(question, prompt, options)
            outcome = ANSWERED
        except NoDecision as exc:
            outcome = exc.reason.value
            detail = str(exc)
        except Exception:
            # A bug inside the decider must not take the turn down: no answer is the
            # conservative branch; the trace makes the bug visible.
            log.exception("decision raised", extra={"question": question.value})
            outcome, detail = NoAnswerReason.ERROR.value, "unexpected error"
        elapsed = time.perf_counter() - started
        DECISION_CALLS.labels(question=question.value, outcome=outcome).inc()
        DECISION_LATENCY.labels(question=question.value).observe(elapsed)
        record_decision(question.value)
        fields = {"question": question.value, "latency_ms": round(elapsed * 1000, 1)}
        if outcome == ANSWERED:
            log.info("decision", extra={**fields, "outcome": outcome, "answer": answer})
        else:
            log.warning("no decision", extra={**fields, "outcome": outcome, "detail": detail})
        log.debug("decision prompt", extra={"question": question.value, "prompt": prompt})
        return answer

    async def boolean(self, question: Question, prompt: str) -> bool | None:
        expect_kind(question, Kind.BOOLEAN)
        value = await self._answer(question, prompt, None)
        return value if isinstance(value, bool) else None

    async def probability(self, question: Question, prompt: str) -> float | None:
        expect_kind(question, Kind.PROBABILITY)
        value = await self._answer(question, prompt, None)
        if isinstance(value, bool) or not isinstance(value, int | float):
            return None
        return float(value)

    async def choice(self, question: Question, prompt: str, options: Sequence[str]) -> str | None:
        expect_kind(question, Kind.CHOICE)
        if isinstance(options, str) or not options:
            raise ValueError(f"{question} needs a non-empty list of options")
        value = await self._answer(question, prompt, list(options))
        return value if isinstance(value, str) else None
