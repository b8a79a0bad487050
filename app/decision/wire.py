"""The /v1/decide wire format (the decision service's OpenAPI document), shared by the
client, the service and the fake.

Pure functions: build a request body, check an answer body against the request it answers."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any, Self

from pydantic import BaseModel, ConfigDict, Field, model_validator

from app.decision.base import DecisionAnswer, NoAnswerReason, NoDecision
from app.decision.vocabulary import Kind, Question

# The single key of a 200 body, per kind: {"answer": true}, {"probability": 0.7}, {"choice": "x"}.
ANSWER_KEYS: dict[Kind, str] = {
    Kind.BOOLEAN: "answer",
    Kind.PROBABILITY: "probability",
    Kind.CHOICE: "choice",
}


class DecideRequest(BaseModel):
    """A request the service accepts; anything else is a 422."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    question: Question
    kind: Kind
    prompt: str = Field(min_length=1)
    options: list[str] | None = None

    @model_validator(mode="after")
    def _fits_the_question(self) -> Self:
        if self.kind is not self.question.kind:
            raise ValueError(f"{self.question} is a {self.question.kind} question")
        if self.kind is Kind.CHOICE:
            if not self.options:
                raise ValueError("a choice needs a non-empty list of options")
            if any(not option for option in self.options):
                raise ValueError("options must be non-empty strings")
        elif self.options is not None:
            raise ValueError(f"a {self.kind} question takes no options")
        return self


# What an answer cost, as headers beside the body (whose shape the wire format fixes): the
# service's model tokens for this decision. Optional: a service that does not say costs 0.
INPUT_TOKENS = "x-decision-input-tokens"
OUTPUT_TOKENS = "x-decision-output-tokens"


def token_headers(input_tokens: int, output_tokens: int) -> dict[str, str]:
    return {INPUT_TOKENS: str(input_tokens), OUTPUT_TOKENS: str(output_tokens)}


def tokens_of(headers: Mapping[str, str]) -> tuple[int, int] | None:
    """Pure: the tokens an answer's headers report, or None when they are missing or not
    two non-negative integers."""
    try:
        spent = int(headers[INPUT_TOKENS]), int(headers[OUTPUT_TOKENS])
    except (KeyError, ValueError):
        return None
    return spent if min(spent) >= 0 else None


def request_body(question: Question, prompt: str, options: Sequence[str] | None) -> dict[str, Any]:
    return {
        "question": question.value,
        "kind": question.kind.value,
        "prompt": prompt,
        "options": list(options) if options is not None else None,
    }


class UnfitAnswer(NoDecision):
    """An answer body that is not exactly the contract's shape, or does not fit the request."""


def fit_answer(kind: Kind, options: Sequence[str] | None, body: object) -> DecisionAnswer:
    """Return the answer in ``body`` if it is exactly the shape for ``kind`` and fits the
    request; raise UnfitAnswer (reason malformed or unfit) otherwise. Never coerces."""
    key = ANSWER_KEYS[kind]
    if not isinstance(body, Mapping) or set(body) != {key}:
        raise UnfitAnswer(f"expected exactly {{{key!r}}}", reason=NoAnswerReason.MALFORMED)
    value = body[key]
    if kind is Kind.BOOLEAN:
        if not isinstance(value, bool):
            raise UnfitAnswer("answer is not a boolean", reason=NoAnswerReason.MALFORMED)
        return value
    if kind is Kind.PROBABILITY:
        return _probability(value)
    if not isinstance(value, str):
        raise UnfitAnswer("choice is not a string", reason=NoAnswerReason.MALFORMED)
    if options is None or value not in options:
        raise UnfitAnswer("choice is not one of the options", reason=NoAnswerReason.UNFIT)
    return value


def _probability(value: object) -> float:
    # bool is an int in Python; true is not a probability.
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise UnfitAnswer("probability is not a number", reason=NoAnswerReason.MALFORMED)
    if not math.isfinite(value) or not 0.0 <= value <= 1.0:
        raise UnfitAnswer("probability outside [0, 1]", reason=NoAnswerReason.UNFIT)
    return float(value)


def answer_body(kind: Kind, value: DecisionAnswer) -> dict[str, DecisionAnswer]:
    return {ANSWER_KEYS[kind]: value}
