"""What a block of work spent on models: decision calls, chat calls and tokens, per purpose.

``with spend_scope() as spend:`` collects everything awaited inside the block, including tasks
it starts (they inherit the context); nested scopes each see their own share. Calls made outside
any scope are simply not tracked."""

from __future__ import annotations

import contextvars
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any


@dataclass
class PurposeSpend:
    model_calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0


@dataclass
class Spend:
    decision_calls: int = 0
    model_calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    by_purpose: dict[str, PurposeSpend] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        """A JSON-ready summary (the nightly run stores this)."""
        return {
            "decision_calls": self.decision_calls,
            "model_calls": self.model_calls,
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "by_purpose": {
                purpose: vars(spent).copy() for purpose, spent in sorted(self.by_purpose.items())
            },
        }


# The open scopes, innermost last; a tuple so a child task's copy of the context stays valid.
_scopes: contextvars.ContextVar[tuple[Spend, ...]] = contextvars.ContextVar(
    "spend_scopes", default=()
)


@contextmanager
def spend_scope() -> Iterator[Spend]:
    spend = Spend()
    token = _scopes.set((*_scopes.get(), spend))
    try:
        yield spend
    finally:
        _scopes.reset(token)


def record_decision() -> None:
    for spend in _scopes.get():
        spend.decision_calls += 1


def record_model_call(purpose: str, *, input_tokens: int, output_tokens: int) -> None:
    """Count one model call (successful or not: a failed call has zero tokens)."""
    for spend in _scopes.get():
        spend.model_calls += 1
        spend.input_tokens += input_tokens
        spend.output_tokens += output_tokens
        spent = spend.by_purpose.setdefault(purpose, PurposeSpend())
        spent.model_calls += 1
        spent.input_tokens += input_tokens
        spent.output_tokens += output_tokens
