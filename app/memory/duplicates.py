"""The near-duplicate check before a memory is added or rewritten (pure, deterministic).

A new text says the same as an existing memory when, over the tokens of both
(app/kit/tokens.py): they have the same words; one's words are all in the other (the new
one adds nothing, or the new one says more); or their weighted overlap — words weighted by
how rare they are among the person's memories, so a name in every note counts for nothing
and the one word that tells two cats apart counts for a lot — reaches ``THRESHOLD``.
A difference in a negation ("not", "ない", ...) is never a duplicate.

A text that repeats a memory in other words (found by meaning, EMBEDDINGS_BASE_URL) shares
few words with it; vectors alone cannot tell it from a distinct fact of the same shape ("an
older brother in Nagoya" / "a younger sister in Fukuoka" score about as high as a true
repeat). ``telling_difference`` looks at what differs: a negation, a number, a name or place
of the old text the new one drops, or one value swapped for another in the same sentence.
Only a candidate with none of these is put to the decision model (``same_memory``)."""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import StrEnum

from app.kit.tokens import token_set, tokenize

# Chosen on the tuning half of bench/recall.py's generated pairs (`--tune`): the lowest that
# merged no distinct fact there. The held-out half is reported beside it.
THRESHOLD = 0.8
MIN_CONTAINED = 3  # containment counts only when the smaller side has this many words
NEGATIONS = frozenset(
    {
        "not",
        "no",
        "never",
        "nor",
        "none",
        "nothing",
        "without",
        "t",  # don't, doesn't, isn't …
        "anymore",
        "ない",
        "なく",
        "ませ",
        "せん",
        "ず",
        "いや",
        "なか",  # なかった
        "안",
        "않",
        "못",
        "없",
    }
)


class Kind(StrEnum):
    SAME = "same words"
    ALREADY_SAID = "adds nothing to it"
    SAYS_MORE = "says more than it"
    SIMILAR = "says nearly the same"

    @property
    def adds_nothing(self) -> bool:
        """The existing text already holds all of the new one: keep it, refresh it."""
        return self in (Kind.SAME, Kind.ALREADY_SAID)


@dataclass(frozen=True, slots=True)
class Duplicate:
    memory_id: int
    kind: Kind
    similarity: float

    def reason(self) -> str:
        return f"near-duplicate of memory {self.memory_id}: {self.kind} ({self.similarity:.2f})"


def weighted_overlap(
    new: frozenset[str], old: frozenset[str], weight: Callable[[str], float]
) -> float:
    """Σ weight over shared words / Σ weight over all words (1.0 for two empty sets)."""
    union = sum(weight(t) for t in new | old)
    return 1.0 if union <= 0 else sum(weight(t) for t in new & old) / union


def _kind(
    new: frozenset[str], old: frozenset[str], similarity: float, threshold: float
) -> Kind | None:
    if (new ^ old) & NEGATIONS:
        return None
    if new == old:
        return Kind.SAME
    if new < old and len(new) >= MIN_CONTAINED:
        return Kind.ALREADY_SAID
    if old < new and len(old) >= MIN_CONTAINED:
        return Kind.SAYS_MORE
    return Kind.SIMILAR if similarity >= threshold else None


def find_duplicate(
    content: str,
    candidates: Sequence[tuple[int, str]],
    weight: Callable[[str], float],
    *,
    threshold: float = THRESHOLD,
) -> Duplicate | None:
    """The existing memory (id, text) that ``content`` repeats, the closest one first; None
    when it repeats none. Candidates come best first; a tie keeps the earlier one."""
    new = token_set(content)
    if not new:
        return None
    found: Duplicate | None = None
    for memory_id, text in candidates:
        old = token_set(text)
        similarity = weighted_overlap(new, old, weight)
        kind = _kind(new, old, similarity, threshold)
        if kind is not None and (found is None or similarity > found.similarity):
            found = Duplicate(memory_id, kind, similarity)
    return found


class Difference(StrEnum):
    """What tells a new text from a memory it resembles: not a repeat, whatever the vectors."""

    NEGATION = "a negation differs"
    NUMBER = "a number differs"
    NAME = "a name or place of it is missing"
    VALUE = "one value is swapped for another"


# A capitalised word (a name, a place) in Latin script; a sentence's first word counts only
# when it is not one of these.
_CAPITALISED = re.compile(r"(?<![\w'])([A-Z][\w'-]*)")
_SENTENCES = re.compile(r"(?<=[.!?。！？])\s+")
_NOT_NAMES = frozenset(
    [
        "a",
        "an",
        "the",
        "i",
        "my",
        "our",
        "your",
        "his",
        "her",
        "their",
        "its",
        "it",
        "this",
        "that",
        "these",
        "those",
        "there",
        "here",
        "he",
        "she",
        "they",
        "we",
        "you",
        "nothing",
        "everything",
        "someone",
        "something",
        "every",
        "each",
        "all",
        "no",
        "not",
        "never",
        "now",
        "then",
        "today",
        "yesterday",
        "tomorrow",
    ]
)
# Katakana words (foreign names and places), and kanji nouns: a kanji run that ends at a
# particle, punctuation, katakana or the end (a verb or adjective stem goes on in hiragana).
_KATAKANA = re.compile(r"[\u30A1-\u30FA\u30FC]{2,}")
_KANJI_NOUN = re.compile(
    r"([\u4E00-\u9FFF\u3005]+)(?=から|まで|より|[のはがをにへでともや『』「」、。！？\u30A1-\u30FA]|$)"
)
# A swapped value: the texts agree on at least this share of their characters around it.
SAME_SHAPE = 0.5


def _names(text: str) -> set[str]:
    found: set[str] = set()
    for sentence in _SENTENCES.split(text):
        for match in _CAPITALISED.finditer(sentence):
            first = not sentence[: match.start()].strip()
            if not (first and match.group(1).lower() in _NOT_NAMES):
                found.update(tokenize(match.group(1)))  # "Bruno's" → "bruno", "s"
    found.update(m.group(0) for m in _KATAKANA.finditer(text))
    found.update(m.group(1) for m in _KANJI_NOUN.finditer(text))
    return found


def _numbers(text: str) -> set[str]:
    return {t for t in tokenize(text) if any(c.isdigit() for c in t)}


def _plain(text: str) -> str:
    return unicodedata.normalize("NFKC", text).casefold().rstrip(".。!！?？ ")


def _swapped(old: str, new: str) -> bool:
    """The two texts are one sentence with one span changed ("…the banjo" / "…the flute")."""
    a, b = _plain(old), _plain(new)
    shortest = min(len(a), len(b))
    head = 0
    while head < shortest and a[head] == b[head]:
        head += 1
    tail = 0
    while tail < shortest - head and a[-1 - tail] == b[-1 - tail]:
        tail += 1
    changed = a[head : len(a) - tail], b[head : len(b) - tail]
    return all(changed) and head + tail >= SAME_SHAPE * max(len(a), len(b))


# A memory near a new text in meaning is put to the decision model only when their words
# also agree this much (weighted by rarity among the person's memories), or when it is the
# nearest by far (standard deviations above the person's memories at large): chosen on the
# tuning half of bench/recall.py; a memory merely near in topic shares neither.
MIN_OVERLAP = 0.3
MIN_STANDING = 3.0


def may_repeat(old: str, new: str, *, overlap: float, standing: float, nearest: bool) -> bool:
    """Whether ``new`` may repeat ``old`` in other words (the decision model has the last
    word): no telling difference, and words or meaning that point to the same fact."""
    if telling_difference(old, new) is not None:
        return False
    return overlap >= MIN_OVERLAP or (nearest and standing >= MIN_STANDING)


# Japanese phrasings that hold a negative form but affirm ("never misses", "cannot do
# without", "no doubt"): read without it, so "欠かさない" and "もう…していない" differ in
# negation, and "欠かさない" and "毎週…している" do not.
AFFIRMING = ("欠かさない", "欠かさず", "欠かせない", "違いない")


def _negated(text: str) -> frozenset[str]:
    for idiom in AFFIRMING:
        text = text.replace(idiom, " ")
    return token_set(text) & NEGATIONS


def telling_difference(old: str, new: str) -> Difference | None:
    """Why ``new`` cannot be a repeat of ``old`` (which it may resemble in meaning), or None.
    ``new`` may add to ``old`` (a detail, a name), never drop or change what ``old`` says."""
    new_tokens = token_set(new)
    if _negated(old) ^ _negated(new):
        return Difference.NEGATION
    if _numbers(old) != _numbers(new):
        return Difference.NUMBER
    kept = _plain(new)
    if any(name not in kept and name not in new_tokens for name in _names(old)):
        return Difference.NAME
    if _swapped(old, new):
        return Difference.VALUE
    return None
