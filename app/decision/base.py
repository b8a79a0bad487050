"""The decision boundary's two seams: the ``Decider`` the bot asks (three typed calls, each
returning None when there is no answer) and the ``AnswerSource`` behind it (the decision
service over HTTP, or the model in-process), which raises ``NoDecision`` with its reason."""

from __future__ import annotations

from collections.abc import Sequence
from enum import StrEnum
from typing import Protocol

from app.decision.vocabulary import Kind, Question

# One answer of the decision model: a boolean, a probability in [0, 1], or one of the options.
DecisionAnswer = bool | float | str


class Decider(Protocol):
    """A closed-question answerer. ``None`` always means *no answer* (never "no")."""

    async def boolean(self, question: Question, prompt: str) -> bool | None: ...

    async def probability(self, question: Question, prompt: str) -> float | None: ...

    async def choice(
        self, question: Question, prompt: str, options: Sequence[str]
    ) -> str | None: ...


class NoAnswerReason(StrEnum):
    """Why there was no answer; the ``outcome`` label of the decision metrics."""

    STATUS = "status"  # the service answered with a non-200 status
    TIMEOUT = "timeout"  # the service did not answer in time
    CONNECTION = "connection"  # the service could not be reached
    MALFORMED = "malformed"  # the body is not the contract's shape for the kind
    UNFIT = "unfit"  # the shape is right but the value does not fit the request
    MODEL_FAILED = "model_failed"  # in-process: the model call failed
    MODEL_TIMEOUT = "model_timeout"  # in-process: the model call timed out
    ERROR = "error"  # an unexpected error inside the decider (a bug; logged with its trace)


class NoDecision(Exception):
    """The decision model gave no answer; ``reason`` says why (never carries the prompt)."""

    reason: NoAnswerReason = NoAnswerReason.ERROR

    def __init__(self, detail: str = "", *, reason: NoAnswerReason | None = None) -> None:
        super().__init__(detail)
        if reason is not None:
            self.reason = reason


class AnswerSource(Protocol):
    """One decision, raising NoDecision instead of returning None (so the reason survives)."""

    async def decide(
        self, question: Question, prompt: str, options: Sequence[str] | None
    ) -> DecisionAnswer: ...


def expect_kind(question: Question, kind: Kind) -> None:
    """A question is asked only as its own kind: anything else is a programming error."""
    if question.kind is not kind:
        raise ValueError(f"{question} is a {question.kind} question, not {kind}")
