"""A `/v1/decide` request body, as the bot's decision client sends it."""

from __future__ import annotations

from typing import Any

from app.decision.vocabulary import Question


def ask(question: Question, prompt: str = "text", options: Any = None) -> dict[str, Any]:
    return {
        "question": question.value,
        "kind": question.kind.value,
        "prompt": prompt,
        "options": options,
    }
