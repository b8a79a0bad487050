"""The Decider protocol: three typed calls, each returning None when there is no answer."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from app.decision.vocabulary import Question


class Decider(Protocol):
    """A closed-question answerer. ``None`` always means *no answer* (never "no")."""

    async def boolean(self, question: Question, prompt: str) -> bool | None: ...

    async def probability(self, question: Question, prompt: str) -> float | None: ...

    async def choice(
        self, question: Question, prompt: str, options: Sequence[str]
    ) -> str | None: ...
