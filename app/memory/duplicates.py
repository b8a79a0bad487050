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
Only a candidate with none of these is put to the decision model (``same_memory``). In
Japanese, a dictionary tells names from common nouns (app/kit/japanese.py), so a rephrasing
may drop "親友" and keep "健太"; in both languages a verb phrase said otherwise before values
both keep ("is reading Dune" / "is halfway through Dune") is not a swapped value, while a
verb or a noun swapped alone is."""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import StrEnum

from app.kit import japanese
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
_POSSESSIVE = re.compile(r"['’]s$")
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
# A swapped value: the texts agree on at least this share of their characters around it.
SAME_SHAPE = 0.5


def _names(text: str) -> set[str]:
    """Capitalised words of Latin script (a sentence's first word only when it is not one of
    ``_NOT_NAMES``); in Japanese, the names a dictionary knows (app/kit/japanese.py): "健太",
    "那覇", "チャチャ", not "親友", "家" or "予定"."""
    found: set[str] = set()
    for sentence in _SENTENCES.split(text):
        for match in _CAPITALISED.finditer(sentence):
            first = not sentence[: match.start()].strip()
            if not (first and match.group(1).lower() in _NOT_NAMES):
                found.update(tokenize(_POSSESSIVE.sub("", match.group(1))))  # "Bruno's" → "bruno"
    if japanese.has_japanese(text):
        found.update(japanese.names(unicodedata.normalize("NFKC", text)))
    return found


def _numbers(text: str) -> set[str]:
    return {t for t in tokenize(text) if any(c.isdigit() for c in t)}


def _plain(text: str) -> str:
    return unicodedata.normalize("NFKC", text).casefold().rstrip(".。!！?？ ")


def _swapped(old: str, new: str) -> bool:
    """The two texts are one sentence with one value changed ("…the banjo" / "…the flute"):
    one span differs, the rest agrees, and the span is not a rephrasing of the verb before
    values both keep ("is reading Dune" / "is halfway through Dune")."""
    a, b = _plain(old), _plain(new)
    shortest = min(len(a), len(b))
    head = 0
    while head < shortest and a[head] == b[head]:
        head += 1
    tail = 0
    while tail < shortest - head and a[-1 - tail] == b[-1 - tail]:
        tail += 1
    changed = a[head : len(a) - tail], b[head : len(b) - tail]
    if not (all(changed) and head + tail >= SAME_SHAPE * max(len(a), len(b))):
        return False
    if japanese.has_japanese(a) or japanese.has_japanese(b):
        return not _japanese_predicate(a, b, head, tail)
    return not _english_predicate(a, b, head, tail)


def _japanese_predicate(a: str, b: str, head: int, tail: int) -> bool:
    """Only the verb phrase differs, and by more than its verb: its particles or auxiliaries
    too (に行く / を訪れたいと思っている); what both keep names what the fact is about. A
    verb for another alone (習っている / 教えている) is a value, as a noun would be."""
    kept: list[japanese.Word] = []
    ties: list[list[str]] = []
    for text in (a, b):
        at, end = 0, len(text) - tail
        ties.append([])
        for word in japanese.words(text):
            inside = at < end and at + len(word.surface) > head
            if inside and word.kind not in (japanese.Kind.VERB, japanese.Kind.PARTICLE):
                return False
            if inside and word.kind is japanese.Kind.PARTICLE:
                ties[-1].append(word.surface)
            if not inside:
                kept.append(word)
            at += len(word.surface)
    nouns = (japanese.Kind.NOUN, japanese.Kind.NAME)
    return ties[0] != ties[1] and any(w.kind in nouns for w in kept)


# English words that lead a verb into its object or say its tense and mood: a span of them
# with a verb ("signed up for the" / "will compete in a") is how a fact is said. Articles and
# possessives go with the noun after them, and count as neither.
_LINKING = frozenset(
    [
        "to",
        "for",
        "in",
        "on",
        "at",
        "of",
        "with",
        "from",
        "by",
        "about",
        "into",
        "onto",
        "through",
        "up",
        "down",
        "out",
        "off",
        "over",
        "will",
        "would",
        "shall",
        "should",
        "can",
        "could",
        "may",
        "might",
        "must",
        "is",
        "are",
        "was",
        "were",
        "be",
        "been",
        "being",
        "am",
        "has",
        "have",
        "had",
        "do",
        "does",
        "did",
    ]
)
_DETERMINERS = frozenset(["a", "an", "the", "my", "your", "his", "her", "its", "our", "their"])
_WORD = re.compile(r"\w+")


def _english_predicate(a: str, b: str, head: int, tail: int) -> bool:
    """The span is a verb phrase leading into values both keep after it: each side holds a
    word of its own beside the linking ones, one side ends in a linking word ("reading" /
    "halfway through"), and a word that is not linking follows in both."""
    while head > 0 and a[head - 1].isalnum():
        head -= 1
    while tail > 0 and a[len(a) - tail].isalnum():
        tail -= 1
    spans = [
        [w for w in _WORD.findall(t[head : len(t) - tail]) if w not in _DETERMINERS] for t in (a, b)
    ]
    after = _WORD.findall(a[len(a) - tail :]) if tail else []
    return (
        all(any(w not in _LINKING for w in span) for span in spans)
        and any(span[-1] in _LINKING for span in spans)
        and any(w not in _LINKING | _DETERMINERS for w in after)
    )


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


# Phrasings that hold a negative form but affirm ("never misses", "cannot do without", "no
# doubt"): read without it, so "欠かさない" and "もう…していない" differ in negation, and
# "欠かさない" and "毎週…している" do not; "never misses yoga" and "goes to yoga every week"
# neither, while "no longer goes" still holds its "no".
AFFIRMING = (
    "欠かさない",
    "欠かさず",
    "欠かせない",
    "違いない",
    "never misses",
    "never miss",
    "never missed",
    "never fails to",
    "nothing beats",
    "nothing is better than",
    "nothing better than",
    "can't get enough of",
    "cannot get enough of",
    "can't live without",
    "cannot live without",
    "couldn't live without",
    "no doubt",
)
_AFFIRMING = re.compile("|".join(re.escape(idiom) for idiom in AFFIRMING), re.IGNORECASE)


def _negated(text: str) -> frozenset[str]:
    return token_set(_AFFIRMING.sub(" ", text.replace("’", "'"))) & NEGATIONS


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
