"""Pure helpers for outgoing messages: splitting long text into Discord-sized parts, and the
per-part nonce that lets Discord drop a retried duplicate."""

from __future__ import annotations

import hashlib
import re

MESSAGE_LIMIT = 2000
NONCE_LENGTH = 25  # Discord accepts string nonces of at most 25 characters

_FENCE = "```"
_CLOSE = "\n" + _FENCE
# A sentence ends at . ! or ? followed by a space; the space is the split point.
_SENTENCE_END = re.compile(r"[.!?](?= )")


def message_nonce(key: str, channel_id: int, index: int) -> str:
    """The nonce of part ``index`` of the reply to event ``key`` in ``channel_id``.

    Deterministic, so a retried turn sends the same nonces and Discord (``enforce_nonce``)
    returns the earlier message instead of posting a duplicate."""
    digest = hashlib.sha256(f"{key}\x1f{channel_id}\x1f{index}".encode()).hexdigest()
    return digest[:NONCE_LENGTH]


def split_message(content: str, limit: int = MESSAGE_LIMIT) -> list[str]:
    """Split ``content`` into parts of at most ``limit`` characters.

    Cuts at the last paragraph break, else line break, else sentence end, else space, else hard
    at the limit. Only whitespace at a cut is dropped; blank content gives no parts. A code
    fence left open by a part is closed there and re-opened (same info string) in the next."""
    if limit < 1:
        raise ValueError("limit must be positive")
    parts: list[str] = []
    rest = content.strip()
    floor = 0  # length of a re-opened fence line at the start of ``rest``
    while rest:
        if len(rest) <= limit:
            parts.append(rest)
            break
        part, after = _take(rest, limit, floor)
        opener = _open_fence(part)
        if opener is not None and len(opener) + len(_CLOSE) < limit // 4:
            # Keep highlighting intact: close the fence here, re-open it in the next part.
            part, after = _take(rest, limit - len(_CLOSE), floor)
            opener = _open_fence(part)
            if opener is not None:
                part += _CLOSE
                after = opener + "\n" + after
        floor = 0 if opener is None else len(opener) + 1
        parts.append(part)
        rest = after
    return parts


def _take(text: str, limit: int, floor: int) -> tuple[str, str]:
    """Cut one part of at most ``limit`` characters off ``text`` (longer than ``limit``).

    ``text`` starts with a non-space character, so the part is never empty; the cut lies past
    ``floor`` so that a re-opened fence line is never a part on its own."""
    end, start = _cut(text, limit, floor)
    return text[:end].rstrip(), text[start:].lstrip()


def _cut(text: str, limit: int, floor: int) -> tuple[int, int]:
    """Where the part ends and where the next part starts, preferring natural boundaries.

    A boundary in the first half of the window would make a stub part, so each kind is used
    only if it falls in the second half; otherwise the latest boundary of any kind wins."""
    candidates = [
        _last(text, "\n\n", limit),
        _last(text, "\n", limit),
        _last_sentence(text, limit),
        _last(text, " ", limit),
    ]
    found = [c for c in candidates if c is not None and c[0] > floor]
    for end, start in found:
        if end >= limit // 2:
            return end, start
    if found:
        return max(found)
    return limit, limit


def _last(text: str, separator: str, limit: int) -> tuple[int, int] | None:
    index = text.rfind(separator, 1, limit + len(separator))
    return None if index <= 0 else (index, index + len(separator))


def _last_sentence(text: str, limit: int) -> tuple[int, int] | None:
    ends = [m.end() for m in _SENTENCE_END.finditer(text, 0, limit + 1) if m.end() <= limit]
    return (ends[-1], ends[-1]) if ends else None


def _open_fence(text: str) -> str | None:
    """The opening line (``` plus info string) of a fence ``text`` leaves open, if any."""
    opener: str | None = None
    for line in text.split("\n"):
        stripped = line.strip()
        if stripped.startswith(_FENCE):
            opener = None if opener is not None else stripped
    return opener
