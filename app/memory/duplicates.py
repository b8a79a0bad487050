"""The near-duplicate check before a memory is added or rewritten (pure, deterministic).

A new text says the same as an existing memory when, over the tokens of both
(app/kit/tokens.py): they have the same words; one's words are all in the other (the new
one adds nothing, or the new one says more); or their weighted overlap — words weighted by
how rare they are among the person's memories, so a name in every note counts for nothing
and the one word that tells two cats apart counts for a lot — reaches ``THRESHOLD``.
A difference in a negation ("not", "ない", ...) is never a duplicate."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import StrEnum

from app.kit.tokens import token_set

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
