"""One attempt at one recorded event, as the job hands it to the turn."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime


@dataclass(frozen=True, slots=True)
class Attempt:
    """``since``: when the event began for us (recorded, or said, whichever was first); an
    erasure of the author that began later stops it writing anything more. ``deadline``:
    ``time.monotonic()`` when the hosting job is killed (None: no limit). ``last``: no retry
    follows if this attempt fails."""

    event_id: str
    since: datetime
    deadline: float | None = None
    last: bool = True
