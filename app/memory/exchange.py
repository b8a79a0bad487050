"""The unit the memory write path reads: a few rendered lines and the speaker they are about."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Line:
    author_id: int
    author_name: str
    is_bot: bool
    content: str


@dataclass(frozen=True, slots=True)
class Exchange:
    """Up to six messages, oldest first, and the one person whose memories may change."""

    speaker_id: int
    speaker_name: str
    lines: tuple[Line, ...]

    def render(self) -> str:
        return "\n".join(f"{line.author_name}: {line.content}" for line in self.lines)

    @property
    def usable(self) -> bool:
        """Nothing to learn unless the speaker actually said something."""
        return any(
            line.author_id == self.speaker_id and not line.is_bot and line.content.strip()
            for line in self.lines
        )
