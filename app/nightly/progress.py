"""Where a nightly run stands: the pending step and what the earlier steps planned, stored as
``summary.progress`` of the run row. One model, so every step reads and writes the same
fields and mypy follows a rename; runs stored before a field existed read its default."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

from pydantic import BaseModel, BeforeValidator, ConfigDict, PlainSerializer

from app.vocabulary import NightlyStep, StepName


def _step(value: object) -> object:
    return NightlyStep.parse(value) if isinstance(value, str) else value


# Stored as its text (``extract:3``), which job ids and the admin API show as well.
Step = Annotated[NightlyStep, BeforeValidator(_step), PlainSerializer(str, return_type=str)]
FIRST_STEP = NightlyStep(StepName.PLAN)


class Chunk(BaseModel):
    """One speaker's chunk of six, by message id (the texts are read again when it runs)."""

    model_config = ConfigDict(frozen=True)

    speaker: str
    index: int
    messages: list[str]


class Progress(BaseModel):
    model_config = ConfigDict(extra="ignore", arbitrary_types_allowed=True)

    next: Step | None = FIRST_STEP
    resumes: int = 0
    beat: datetime | None = None  # when the last step ended
    resumed_at: datetime | None = None
    # plan: the chunks, their waves (fixed with the plan, so a resume continues the same ones)
    chunks: list[Chunk] = []
    waves: list[list[int]] | None = None
    failed_speakers: list[str] = []
    memory_off: bool = False
    # decay: the stale memories picked on its first batch, reviewed five a batch
    stale: list[int] | None = None
    # style: the guilds revised tonight, fixed by its first step (one guild a step)
    style_guilds: list[str] | None = None

    @classmethod
    def of(cls, summary: dict[str, object]) -> Progress:
        return cls.model_validate(summary.get("progress") or {})

    def stored(self) -> dict[str, object]:
        return self.model_dump(mode="json")
