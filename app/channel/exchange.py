"""The unit the memory write path reads: a few rendered lines and the one speaker they are
about. One builder serves the reply path, the channel consolidation and the nightly run."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TypeVar

# Seed 000: "the last six messages" of an exchange; nightly chunks are sixes too.
EXCHANGE_SIZE = 6

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Place:
    """Where something was said: a guild (its id), or a DM (``guild_id`` None)."""

    guild_id: int | None

    @property
    def is_dm(self) -> bool:
        return self.guild_id is None


DM = Place(None)


@dataclass(frozen=True, slots=True)
class Line:
    author_id: int
    author_name: str
    is_bot: bool
    content: str
    message_id: int | None = None  # the logged message (provenance), when there is one
    channel_id: int | None = None
    # What the message carried, by name only: a file's content never reaches the write path,
    # so no memory is ever made from what a person attached but did not say.
    attachments: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Exchange:
    """Up to six messages, oldest first, and the one person whose memories may change.

    ``place`` is where all of its lines were said (an exchange never mixes guilds or DMs);
    None when it is not known (the memory it yields is then treated as private)."""

    speaker_id: int
    speaker_name: str
    lines: tuple[Line, ...]
    place: Place | None = None
    trigger_id: int | None = None  # the message the exchange was answered for, if one was

    def learned_from(self, numbers: Iterable[int]) -> list[tuple[int, int]]:
        """(message id, channel id) of the lines numbered ``numbers`` (1 is the oldest) that
        are the speaker's own logged messages, the ones a note's writer said it used; when
        none is, the message that triggered the exchange (else the speaker's newest)."""
        own = {
            number: (line.message_id, line.channel_id)
            for number, line in enumerate(self.lines, start=1)
            if line.author_id == self.speaker_id
            and not line.is_bot
            and line.message_id is not None
            and line.channel_id is not None
        }
        named = [own[n] for n in dict.fromkeys(numbers) if n in own]
        if named:
            return named
        triggered = [message for message in own.values() if message[0] == self.trigger_id]
        return triggered or list(own.values())[-1:]

    @property
    def usable(self) -> bool:
        """Nothing to learn unless the speaker actually said something."""
        return any(
            line.author_id == self.speaker_id and not line.is_bot and line.content.strip()
            for line in self.lines
        )


def build_exchange(
    lines: Iterable[Line], *, speaker_id: int, place: Place | None, trigger_id: int | None = None
) -> Exchange:
    """The newest six lines, oldest first, about ``speaker_id``; the speaker's name is the
    one on their newest line."""
    kept = tuple(lines)[-EXCHANGE_SIZE:]
    names = [line.author_name for line in kept if line.author_id == speaker_id]
    return Exchange(
        speaker_id=speaker_id,
        speaker_name=names[-1] if names else str(speaker_id),
        lines=kept,
        place=place,
        trigger_id=trigger_id,
    )


def in_sixes(items: Sequence[T], *, keep: int) -> list[list[T]]:
    """Chunks of six cut from the newest end, the newest ``keep`` chunks, oldest first (so a
    later chunk can update what an earlier one added)."""
    chunks: list[list[T]] = []
    end = len(items)
    while end > 0 and len(chunks) < keep:
        chunks.append(list(items[max(0, end - EXCHANGE_SIZE) : end]))
        end -= EXCHANGE_SIZE
    return chunks[::-1]
