"""The decision model's whole vocabulary: every closed question the bot asks
(docs/operations.md, "Decision questions")."""

from __future__ import annotations

from enum import StrEnum


class Kind(StrEnum):
    BOOLEAN = "boolean"
    PROBABILITY = "probability"
    CHOICE = "choice"


class Question(StrEnum):
    IS_CORRECTION = "is_correction"
    EMOJI_ENOUGH = "emoji_enough"
    EMOJI_CHOICE = "emoji_choice"
    IS_TASK = "is_task"
    WORTH_KEEPING = "worth_keeping"
    MEMORY_VERDICT = "memory_verdict"
    ADD_MEMORY = "add_memory"
    STALE_KEEP = "stale_keep"
    SAME_MEMORY = "same_memory"

    @property
    def kind(self) -> Kind:
        return QUESTION_KINDS[self]


QUESTION_KINDS: dict[Question, Kind] = {
    Question.IS_CORRECTION: Kind.BOOLEAN,
    Question.EMOJI_ENOUGH: Kind.BOOLEAN,
    Question.EMOJI_CHOICE: Kind.CHOICE,
    Question.IS_TASK: Kind.BOOLEAN,
    Question.WORTH_KEEPING: Kind.PROBABILITY,
    Question.MEMORY_VERDICT: Kind.CHOICE,
    Question.ADD_MEMORY: Kind.PROBABILITY,
    Question.STALE_KEEP: Kind.CHOICE,
    Question.SAME_MEMORY: Kind.BOOLEAN,
}

VERDICT_OPTIONS = ("keep", "update", "delete")
STALE_OPTIONS = ("keep", "delete")

# Probabilities are compared with 0.5: at or above means yes.
YES_THRESHOLD = 0.5
