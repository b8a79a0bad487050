"""Japanese words and what they are (pure, deterministic): a morphological dictionary behind
a small interface, so the near-duplicate check can tell a name from a common noun.

Japanese has no spaces and no capitals: "親友", "家", "予定" and "健太", "那覇", "星野印刷"
are all runs of kanji, and only a dictionary tells the names apart. This reads them with
janome (pure Python, its own IPADIC inside the wheel, pinned in pyproject.toml; no network).
The dictionary is loaded on the first call and once per process (about 0.5 s and some 80 MB
of mapped pages): ``load`` does it ahead, off the event loop. Nothing else imports janome,
so another analyzer (SudachiPy, fugashi with UniDic) can replace it here alone."""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum
from functools import cache, lru_cache
from typing import Any

_JAPANESE = re.compile(r"[\u3041-\u309F\u30A1-\u30FA\u30FC\u3005\u4E00-\u9FFF]")
_KANJI_OR_KATAKANA = re.compile(r"[\u30A1-\u30FA\u30FC\u3005\u4E00-\u9FFF]")
_KANJI = re.compile(r"[\u3005\u4E00-\u9FFF]")


class Kind(StrEnum):
    NAME = "name"  # a proper noun, a word it does not know, a lone kanji that may be a name
    NOUN = "noun"  # a common noun, an adjective or an adverb: what a fact is about
    VERB = "verb"  # a verb, or a noun made one with する (出場する, 練習している)
    PARTICLE = "particle"  # a particle or an auxiliary: how the words are tied and said
    OTHER = "other"  # a number, a symbol, a prefix


@dataclass(frozen=True, slots=True)
class Word:
    surface: str
    kind: Kind


def has_japanese(text: str) -> bool:
    return _JAPANESE.search(text) is not None


@cache
def _tokenizer() -> Any:
    from janome.tokenizer import Tokenizer  # the one place it is imported: loaded lazily

    return Tokenizer()


@lru_cache(maxsize=4096)
def _given(surface: str) -> bool:
    """Whether the dictionary also lists ``surface`` as a person's name (人名), whichever
    reading the sentence took (janome 0.5's dictionary lookup, as its tokenizer calls it)."""
    tokenizer = _tokenizer()
    dictionary = tokenizer.sys_dic
    return any(
        entry[1] == surface and "人名" in dictionary.lookup_extra(entry[0])[0]
        for entry in dictionary.lookup(surface.encode("utf8"), tokenizer.matcher)
    )


def load() -> None:
    """Load the dictionary now (once per process); later calls return at once."""
    _tokenizer()


def _kind(surface: str, pos: str, known: bool, following: str) -> Kind:
    parts = pos.split(",")
    if parts[0] != "名詞":
        if parts[0] == "動詞":
            return Kind.VERB
        if parts[0] in ("助動詞", "助詞"):
            return Kind.PARTICLE
        return Kind.OTHER if parts[0] in ("接頭詞", "記号", "フィラー") else Kind.NOUN
    if parts[1] == "数":
        return Kind.OTHER
    # A name the dictionary knows, or a word it does not (a pet's or a shop's name) written
    # in kanji or katakana; names in hiragana alone it cuts wrongly ("だいちの" → "だい",
    # "ちの"), and those it cannot tell from words anyway.
    if (parts[1] == "固有名詞" or not known) and _KANJI_OR_KATAKANA.search(surface):
        return Kind.NAME
    if parts[1] == "一般" and len(surface) == 1 and _KANJI.match(surface) and _given(surface):
        return Kind.NAME  # 愛, 彩: a lone kanji that can be a given name is read as one
    if parts[1] == "サ変接続" and following.startswith(("する", "し", "さ", "せ")):
        return Kind.VERB  # 出場する, 練習している: a verb written with a noun and する
    if parts[1] in ("非自立", "接尾", "代名詞"):
        return Kind.OTHER
    return Kind.NOUN


def words(text: str) -> tuple[Word, ...]:
    """The words of ``text`` in order (all of its characters, cut at word boundaries). Not
    cached: the texts are people's memories, and a process-wide cache would keep them past
    an edit, a forget or an erasure (a cut is ~1.5 ms, in the background write path)."""
    tokens = list(_tokenizer().tokenize(text))
    following = [t.surface for t in tokens[1:]] + [""]
    return tuple(
        Word(t.surface, _kind(t.surface, t.part_of_speech, t.node_type != "UNKNOWN", after))
        for t, after in zip(tokens, following, strict=True)
    )


def names(text: str) -> set[str]:
    """The names in ``text`` (people, places, organisations, words no dictionary knows)."""
    return {w.surface for w in words(text) if w.kind is Kind.NAME}
