"""Words the code branches on, each spelled once: who wrote a ledger row and what it did,
why a rollback skipped a change, and the nightly run's steps. Everything else uses these
types (a test keeps string copies out of app/), so mypy catches a rename."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class Actor(StrEnum):
    """Who read or changed a profile (`memory_log.actor`, docs/operations.md)."""

    EXTRACTION = "extraction"
    REPLY = "reply"
    COMMAND = "command"
    NIGHTLY = "nightly"
    CONSOLIDATION = "consolidation"
    STAFF = "staff"
    RETENTION = "retention"
    FORGETME = "forgetme"
    ADMIN = "admin"


class Action(StrEnum):
    """What a ledger row records (`memory_log.action`, docs/operations.md)."""

    READ = "read"
    ADD = "add"
    UPDATE = "update"
    DELETE = "delete"
    ROLLBACK = "rollback"


UNDOABLE = (Action.ADD, Action.UPDATE, Action.DELETE)


class SkipReason(StrEnum):
    """Why a rollback leaves a change of the run as it is (the report's words)."""

    CHANGED_AGAIN = "changed again after the run"
    CHANGED = "changed after the run"
    DELETED = "deleted after the run"
    ID_TAKEN = "the id exists again"
    NO_BEFORE = "no before state recorded"
    FORGOTTEN_BY_OWNER = "deleted after the run by its owner"
    FORGOTTEN_BY_STAFF = "deleted after the run by staff"
    ERASED = "erased after the run (!forgetme)"
    EXPIRED = "expired by retention"
    OWNER_FORGOT_ALL = "its owner ran `!memory forget all` after the run"
    OWNER_ERASED = "its owner was erased after the run"


# What forgot one memory, and what forgot everything of its owner (a row with no memory id).
FORGOT_MEMORY = {
    Actor.COMMAND: SkipReason.FORGOTTEN_BY_OWNER,
    Actor.STAFF: SkipReason.FORGOTTEN_BY_STAFF,
    Actor.FORGETME: SkipReason.ERASED,
    Actor.RETENTION: SkipReason.EXPIRED,
}
FORGOT_PERSON = {
    Actor.COMMAND: SkipReason.OWNER_FORGOT_ALL,
    Actor.FORGETME: SkipReason.OWNER_ERASED,
}


class StepName(StrEnum):
    """The nightly run's steps, in order (app/nightly)."""

    PLAN = "plan"
    EXTRACT = "extract"
    RETENTION = "retention"
    DECAY = "decay"
    DIARY = "diary"
    STYLE = "style"
    FINISH = "finish"


@dataclass(frozen=True, slots=True)
class NightlyStep:
    """One pending step of a run: its name and, for the batched ones, which batch. Stored
    (and used in job ids) as ``name`` or ``name:index``."""

    name: StepName
    index: int = 0

    def __str__(self) -> str:
        batched = self.name in (StepName.EXTRACT, StepName.DECAY, StepName.STYLE)
        return f"{self.name.value}:{self.index}" if batched else self.name.value

    @classmethod
    def parse(cls, text: str) -> NightlyStep:
        """ValueError for anything that is not a step."""
        name, _, index = text.partition(":")
        return cls(StepName(name), int(index) if index else 0)

    def next_batch(self) -> NightlyStep:
        return NightlyStep(self.name, self.index + 1)
