"""What identifies a person in free text, and how to take it out (pure): their names and
mentions, and their own words (what they wrote, what was remembered about them, what they
corrected). An erasure looks for these in every table that holds text."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

MIN_NAME_CHARS = 2  # a one-letter name would match half the text and identify no one
MIN_WORDS_CHARS = 8  # shorter lines ("ok", "thanks!") identify no one and are everywhere
_ASCII_WORD = "A-Za-z0-9_"
SOMEONE = "someone"
ERASED = "[erased]"


def erasure_names(user_id: int, names: Iterable[str | None]) -> list[str]:
    """The strings that identify the person in free text: their names and their mentions."""
    found = {name.strip() for name in names if name and len(name.strip()) >= MIN_NAME_CHARS}
    return sorted(found | {f"<@{user_id}>", f"<@!{user_id}>"})


def _name_pattern(name: str) -> re.Pattern[str]:
    # An ASCII name must stand as a word ("Al" is not in "also"); other names (e.g. Japanese,
    # written without spaces) match anywhere.
    if name.isascii():
        return re.compile(rf"(?<![{_ASCII_WORD}]){re.escape(name)}(?![{_ASCII_WORD}])", re.I)
    return re.compile(re.escape(name), re.I)


def mentions_any(content: str, names: Iterable[str]) -> bool:
    """Case-insensitive; ASCII names as whole words."""
    return any(_name_pattern(name).search(content) for name in names)


def _like(text: str) -> str:
    escaped = text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return f"%{escaped}%"


@dataclass(frozen=True)
class Traces:
    user_id: int
    names: tuple[str, ...]
    words: tuple[str, ...]

    @classmethod
    def of(cls, user_id: int, names: Iterable[str | None], words: Iterable[str]) -> Traces:
        kept = {" ".join(w.split()) for w in words}
        return cls(
            user_id,
            tuple(erasure_names(user_id, names)),
            tuple(sorted(w for w in kept if len(w) >= MIN_WORDS_CHARS)),
        )

    @property
    def like_patterns(self) -> list[str]:
        """ILIKE patterns for a coarse first pass in SQL (refined with ``found_in``)."""
        return [_like(text) for text in (*self.names, *self.words)]

    def found_in(self, text: str) -> bool:
        flat = " ".join(text.split()).casefold()
        return mentions_any(text, self.names) or any(w.casefold() in flat for w in self.words)

    def scrub(self, text: str) -> str:
        """The text with their words blanked and their names and mentions replaced."""
        for word in self.words:
            text = re.sub(re.escape(word), ERASED, " ".join(text.split()), flags=re.I)
        for name in self.names:
            text = _name_pattern(name).sub(SOMEONE, text)
        return text

    def scrub_json(self, value: Any) -> Any:
        """Every string inside a JSON value scrubbed; a user object of theirs loses its
        names (``username``, ``global_name``, ``nick``)."""
        if isinstance(value, str):
            return self.scrub(value)
        if isinstance(value, list):
            return [self.scrub_json(item) for item in value]
        if isinstance(value, dict):
            theirs = str(value.get("id")) == str(self.user_id)
            return {
                key: ERASED
                if theirs and key in ("username", "global_name", "nick") and item
                else self.scrub_json(item)
                for key, item in value.items()
            }
        return value
