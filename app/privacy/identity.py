"""What identifies a person, for an erasure (pure): their mentions (`<@id>`), the names that
are theirs alone and distinctive, and recorded frames with them taken out. Nothing here
matches a name or a word in anyone's text except MEM-09's own rule (old summaries that name
the person), and then only with a distinctive name no one else has used."""

from __future__ import annotations

import re
from collections.abc import Iterable
from functools import cache
from importlib.resources import files
from typing import Any

MENTION_TOKEN = "@someone"  # what a mention of an erased person becomes in others' text
MIN_NAME_CHARS = 4  # a distinctive name: at least this many characters…
MIN_CJK_CHARS = 2  # …or this many Chinese, Japanese or Korean ones
# Han (and its extensions and compatibility forms), kana, half-width kana, Hangul.
_CJK = re.compile(
    "[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff"
    "\uff66-\uff9f\U00020000-\U0003134f]"
)


def mention_pattern(user_id: int) -> re.Pattern[str]:
    return re.compile(rf"<@!?{user_id}>")


def replace_mentions(text: str, user_id: int) -> str:
    return mention_pattern(user_id).sub(MENTION_TOKEN, text)


def names_theirs_alone(
    their_names: Iterable[str | None], names_others_used: Iterable[str]
) -> list[str]:
    """MEM-09's names: those the person wrote under (their username, display names) that
    nobody else has used, compared case-insensitively, and that are distinctive. A nickname
    someone else also had, or one that is a common word ("the", 「です」), identifies no one,
    and is never looked for."""
    taken = {name.casefold() for name in names_others_used}
    kept = {
        name.strip()
        for name in their_names
        if name and distinctive(name.strip()) and name.strip().casefold() not in taken
    }
    return sorted(kept)


def distinctive(name: str) -> bool:
    """A name that could only mean its owner: at least four characters (or two CJK ones),
    and not made only of common English or Japanese words (app/privacy/common_words.txt)."""
    long_enough = len(name) >= MIN_NAME_CHARS or len(_CJK.findall(name)) >= MIN_CJK_CHARS
    words = name.casefold().split()
    return long_enough and not all(word in common_words() for word in words)


@cache
def common_words() -> frozenset[str]:
    """The common words (casefolded), read once: about 27,000 of them."""
    text = files("app.privacy").joinpath("common_words.txt").read_text(encoding="utf-8")
    return frozenset(line for line in text.splitlines() if line and not line.startswith("#"))


# A letter, digit or underscore of a script written with spaces between words.
_SPACED_WORD_CHAR = rf"(?:(?!{_CJK.pattern})\w)"


def _name_pattern(name: str) -> re.Pattern[str]:
    # A name must stand as a word ("Alan" is not in "Alanna", "José" not in "Josélito"),
    # though Japanese may follow it at once (「Aliceさん」); a name with CJK characters
    # (written without spaces) matches anywhere.
    if _CJK.search(name):
        return re.compile(re.escape(name), re.I)
    edge = _SPACED_WORD_CHAR
    return re.compile(rf"(?<!{edge}){re.escape(name)}(?!{edge})", re.I)


def names_any(text: str, names: Iterable[str]) -> bool:
    """Whether ``text`` names one of ``names`` (case-insensitive; ASCII names as words)."""
    return any(_name_pattern(name).search(text) for name in names)


# --- recorded gateway frames ------------------------------------------------------------------


def stub_frame(payload: Any) -> dict[str, Any]:
    """A frame of theirs with nothing of theirs left: its type and the ids it was about.
    The inbox row stays, so a redelivery is still a duplicate; the stub never runs."""
    frame: dict[str, Any] = payload if isinstance(payload, dict) else {}
    data: dict[str, Any] = frame["d"] if isinstance(frame.get("d"), dict) else {}
    kept = {k: data[k] for k in ("id", "channel_id", "guild_id", "message_id") if k in data}
    return {"op": frame.get("op", 0), "t": frame.get("t"), "d": {**kept, "erased": True}}


def is_stub(payload: Any) -> bool:
    data = payload.get("d") if isinstance(payload, dict) else None
    return isinstance(data, dict) and data.get("erased") is True


def without_reference_to(payload: dict[str, Any], user_id: int) -> dict[str, Any]:
    """Someone else's frame that quotes a message of theirs: the quote keeps only its ids."""
    data = payload.get("d")
    if not isinstance(data, dict):
        return payload
    quoted = data.get("referenced_message")
    if not isinstance(quoted, dict) or str((quoted.get("author") or {}).get("id")) != str(user_id):
        return payload
    ids = {k: quoted[k] for k in ("id", "channel_id") if k in quoted}
    return {**payload, "d": {**data, "referenced_message": ids}}


def without_mentions_of(value: Any, user_id: int) -> Any:
    """Every mention of them replaced in every string, and their user object left out of
    every ``mentions`` list (someone else's frame that pinged them)."""
    if isinstance(value, str):
        return replace_mentions(value, user_id)
    if isinstance(value, list):
        return [without_mentions_of(item, user_id) for item in value]
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        for key, item in value.items():
            if key == "mentions" and isinstance(item, list):
                item = [u for u in item if not (isinstance(u, dict) and _is(u, user_id))]
            out[key] = without_mentions_of(item, user_id)
        return out
    return value


def _is(user: dict[str, Any], user_id: int) -> bool:
    return str(user.get("id")) == str(user_id)


# --- nightly summaries ------------------------------------------------------------------------


def summary_without(summary: dict[str, Any], user_id: int) -> dict[str, Any]:
    """A nightly run's summary with the person taken out: their chunks keep their place (a
    running plan indexes them) but no longer name them or their messages, and no error or
    failed-speaker list names them. The change lists hold memory ids only; they stay."""
    who = str(user_id)
    progress = dict(summary.get("progress") or {})
    chunks = progress.get("chunks")
    if isinstance(chunks, list):
        progress["chunks"] = [
            {**chunk, "speaker": "0", "messages": []}
            if isinstance(chunk, dict) and str(chunk.get("speaker")) == who
            else chunk
            for chunk in chunks
        ]
    if isinstance(progress.get("failed_speakers"), list):
        progress["failed_speakers"] = [s for s in progress["failed_speakers"] if str(s) != who]
    errors = summary.get("errors")
    out = {**summary, "progress": progress} if "progress" in summary else dict(summary)
    if isinstance(errors, list):
        out["errors"] = [
            re.sub(rf"\b{who}\b", "an erased person", e) if isinstance(e, str) else e
            for e in errors
        ]
    return out
