"""The near-duplicate check (pure): what counts as saying the same as an existing memory."""

from __future__ import annotations

from collections.abc import Callable

from app.kit.relevance import idf
from app.kit.tokens import token_set
from app.memory.duplicates import Kind, find_duplicate, weighted_overlap

# As among a profile of 40 notes that all name Alice: her name weighs almost nothing.
COUNTS = {"alice": 40, "ha": 10, "has": 10, "a": 20, "cat": 2, "named": 3, "miso": 1, "is": 25}


def weight(term: str) -> float:
    return idf(40, COUNTS.get(term, 0))


def flat(term: str) -> float:
    return 1.0


def judge(new: str, old: str, w: Callable[[str], float] = weight) -> Kind | None:
    found = find_duplicate(new, [(7, old)], w)
    assert found is None or found.memory_id == 7
    return found.kind if found else None


def test_the_same_words_in_another_case_or_order_are_the_same() -> None:
    assert judge("Alice has a cat named Miso.", "alice has a CAT named miso") is Kind.SAME
    same = "アリスはミソという猫を飼っている"
    assert judge(same, same + "。") is Kind.SAME


def test_a_new_text_inside_an_old_one_adds_nothing_and_one_around_it_says_more() -> None:
    old = "Alice has a cat named Miso who loves tuna"
    assert judge("Alice has a cat named Miso", old) is Kind.ALREADY_SAID
    assert judge(old + " and sleeps all day", old) is Kind.SAYS_MORE
    assert Kind.ALREADY_SAID.adds_nothing and not Kind.SAYS_MORE.adds_nothing


def test_the_word_that_tells_two_cats_apart_keeps_them_apart() -> None:
    # Five of six words shared, but the two names are the rarest words of the profile.
    assert judge("Alice has a cat named Mochi", "Alice has a cat named Miso") is None
    # Counted flat, the same pair would look alike: the weights are what tell them apart.
    new, old = token_set("Alice has a cat named Mochi"), token_set("Alice has a cat named Miso")
    assert weighted_overlap(new, old, flat) > weighted_overlap(new, old, weight)


def test_a_rephrasing_that_changes_little_is_nearly_the_same() -> None:
    old = "Alice is learning the cello and practises every evening after work"
    new = "Alice is learning the cello and practices every evening after work"
    assert judge(new, old, flat) is Kind.SIMILAR
    assert judge("Alice took up the trumpet and practices on weekends", old, flat) is None


def test_a_negation_is_never_a_duplicate() -> None:
    assert judge("Alice does not like coffee", "Alice does like coffee") is None
    assert judge("Alice likes coffee", "Alice doesn't like coffee anymore") is None
    assert judge("アリスはコーヒーが好きではない", "アリスはコーヒーが好き") is None


def test_unrelated_short_or_empty_texts_are_not_duplicates() -> None:
    assert judge("Alice plays go", "Alice lives in Osaka") is None
    assert judge("🎉", "Alice likes parties") is None
    assert find_duplicate("Alice likes tea", [], weight) is None


def test_the_closest_candidate_wins() -> None:
    found = find_duplicate(
        "Alice has a cat named Miso",
        [(1, "Alice has a dog"), (2, "Alice has a cat named Miso"), (3, "Alice has a cat")],
        weight,
    )
    assert found is not None and (found.memory_id, found.kind) == (2, Kind.SAME)
    assert "memory 2" in found.reason() and "same words" in found.reason()
