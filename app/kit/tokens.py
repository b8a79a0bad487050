"""The one tokenizer behind recall, search and the near-duplicate check (pure).

Text is NFKC-normalised and case-folded. Scripts written with spaces give words; runs of
CJK characters (kanji, hiragana, katakana, Hangul), which have no spaces, give overlapping
character bigrams and single characters, so a one- or two-character word (猫, 犬, 집) is
found inside a longer run. A lone kana is not a token: hiragana alone are particles and
endings (は, が, の, を), katakana alone are pieces of loanwords, and either would otherwise
pass for a rare word in a profile of English notes.
Mixed text is handled run by run. Discord markup (mentions, channel
links, custom emoji) is not words, and neither are emoji or punctuation.

PostgreSQL's own parser treats `日本語のテスト` as one word; this is why the tokens are made
here and stored beside the text (`search_tokens`), written by each table's owner. A change
to what this returns needs a migration that sets `search_tokens` to NULL (the owners fill
them in again, as for any row written without them) or back-fills them anew."""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable
from functools import cache

# <@123>, <@!123>, <@&123> (role), <#123> (channel), <:name:123> / <a:name:123>, <t:123:R>.
_MARKUP = re.compile(r"<(?:[@#][!&]?\d+|a?:\w+:\d+|t:\d+(?::\w)?)>")

_CJK_RANGES = (
    (0x1100, 0x11FF),  # Hangul Jamo
    (0x3005, 0x3007),  # 々 〆 〇
    (0x3041, 0x309F),  # Hiragana
    (0x30A1, 0x30FA),  # Katakana (the middle dot ・ U+30FB is punctuation)
    (0x30FC, 0x30FF),  # ー and the katakana iteration marks
    (0x3130, 0x318F),  # Hangul compatibility Jamo
    (0x31F0, 0x31FF),  # Katakana phonetic extensions
    (0x3400, 0x4DBF),  # CJK extension A
    (0x4E00, 0x9FFF),  # CJK unified ideographs
    (0xAC00, 0xD7AF),  # Hangul syllables
    (0xF900, 0xFAFF),  # CJK compatibility ideographs
    (0x20000, 0x3FFFF),  # CJK extensions B and later
)


def is_cjk(char: str) -> bool:
    code = ord(char)
    return any(low <= code <= high for low, high in _CJK_RANGES)


def _ranges(ranges: Iterable[tuple[int, int]]) -> str:
    return "".join(f"{re.escape(chr(low))}-{re.escape(chr(high))}" for low, high in ranges)


@cache
def _runs() -> re.Pattern[str]:
    """A CJK run, or a word: letters and digits of any other script with the combining
    marks that belong to them (those of the Basic Multilingual Plane)."""
    cjk = _ranges(_CJK_RANGES)
    marks, start = [], None
    for code in range(0x10000):
        mark = unicodedata.category(chr(code)).startswith("M") and not is_cjk(chr(code))
        if mark and start is None:
            start = code
        elif not mark and start is not None:
            marks.append((start, code - 1))
            start = None
    return re.compile(f"([{cjk}]+)|((?:[^\\W_{cjk}]|[{_ranges(marks)}])+)")


def _fold(word: str) -> str:
    """English plurals and third persons meet their stems ("cats" → "cat", "likes" →
    "like", "berries" → "berry", "boxes" → "box"); short words, "-ss", "-us" and "-is"
    are left alone."""
    if len(word) < 4 or not word.isascii() or not word.endswith("s"):
        return word
    if word.endswith(("ss", "us", "is")):
        return word
    if word.endswith("ies") and len(word) > 4:
        return word[:-3] + "y"
    if word.endswith(("xes", "ches", "shes", "sses", "zzes")):
        return word[:-2]
    return word[:-1]


def is_kana(char: str) -> bool:
    """Hiragana or katakana (the prolonged-sound mark ー included)."""
    code = ord(char)
    return 0x3041 <= code <= 0x30FF or 0x31F0 <= code <= 0x31FF


def _cjk_tokens(run: str) -> list[str]:
    """Every character but a kana, and every overlapping pair of neighbours."""
    found: list[str] = []
    for i, char in enumerate(run):
        if not is_kana(char):
            found.append(char)
        if i + 1 < len(run):
            found.append(run[i : i + 2])
    return found


def without_markup(text: str) -> str:
    """The text as people read it: Discord markup (mentions, channel links, custom emoji,
    timestamps) out, whitespace collapsed."""
    return " ".join(_MARKUP.sub(" ", text).split())


def tokenize(text: str) -> list[str]:
    """The tokens of ``text`` in order, repeats kept (a repeat is a term frequency)."""
    folded = _MARKUP.sub(" ", unicodedata.normalize("NFKC", text).casefold())
    tokens: list[str] = []
    for cjk, word in _runs().findall(folded):
        if cjk:
            tokens += _cjk_tokens(cjk)
        else:
            tokens.append(_fold(word))
    return tokens


def token_set(text: str) -> frozenset[str]:
    return frozenset(tokenize(text))
