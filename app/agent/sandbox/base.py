"""The sandbox boundary: run one shell command for a channel, keep only the output's tail."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

COMMAND_TIMEOUT_S = 60.0
# After its time limit a command gets TERM, then KILL this much later.
KILL_AFTER_S = 2
OUTPUT_TAIL_CHARS = 4000
# Bytes kept while reading: enough for OUTPUT_TAIL_CHARS of 4-byte UTF-8 characters.
TAIL_BYTES = OUTPUT_TAIL_CHARS * 4


@dataclass(frozen=True, slots=True)
class CommandResult:
    exit_code: int | None
    output: str
    timed_out: bool = False
    truncated: bool = False


class SandboxError(Exception):
    """The sandbox could not run the command (backend unreachable, container failed)."""


class SandboxBusy(SandboxError):
    """The cap on running sandboxes is reached; a new channel's sandbox was not started."""

    def __init__(self) -> None:
        super().__init__("all sandboxes are busy, try again later")


class Sandbox(Protocol):
    async def run(self, channel_id: int, command: str, timeout_s: float) -> CommandResult:
        """Run ``bash -lc command`` in the channel's sandbox; never longer than ``timeout_s``."""
        ...


class TailBuffer:
    """Keeps the last ``limit`` bytes of a stream, so a chatty command costs bounded memory."""

    def __init__(self, limit: int = TAIL_BYTES) -> None:
        self._limit = limit
        self._data = bytearray()
        self.dropped = False

    def feed(self, chunk: bytes) -> None:
        self._data += chunk
        excess = len(self._data) - self._limit
        if excess > 0:
            del self._data[:excess]
            self.dropped = True

    def text(self, chars: int = OUTPUT_TAIL_CHARS) -> tuple[str, bool]:
        """The last ``chars`` characters and whether anything earlier was cut."""
        decoded = self._data.decode("utf-8", errors="replace")
        if len(decoded) > chars:
            return decoded[-chars:], True
        return decoded, self.dropped


def result_from(buffer: TailBuffer, exit_code: int | None, *, timed_out: bool) -> CommandResult:
    output, truncated = buffer.text()
    return CommandResult(exit_code, output, timed_out=timed_out, truncated=truncated)
