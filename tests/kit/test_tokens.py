"""The one tokenizer (pure): words for spaced scripts, bigrams and characters for CJK runs,
NFKC and case folding, and nothing from emoji, punctuation or Discord markup."""

from __future__ import annotations

import unicodedata

from hypothesis import given
from hypothesis import strategies as st

from app.kit import tokens as tokens_module
from app.kit.relevance import Query
from app.kit.tokens import _fold, is_cjk, tokenize


def test_english_words_are_case_folded_and_punctuation_splits_them() -> None:
    assert tokenize("How is MISO, my cat?") == ["how", "is", "miso", "my", "cat"]


def test_plurals_and_third_persons_meet_their_stems() -> None:
    assert tokenize("cats likes berries boxes watches") == ["cat", "like", "berry", "box", "watch"]
    # short words and -ss / -us / -is endings are left as they are
    assert tokenize("is was glass bus this") == ["is", "was", "glass", "bus", "this"]


def test_a_japanese_run_gives_its_characters_and_every_neighbouring_pair() -> None:
    assert tokenize("日本語のテスト") == [
        *("日", "日本", "本", "本語", "語", "語の"),
        *("のテ", "テス", "スト"),
    ]


def test_a_lone_kana_is_not_a_token() -> None:
    # hiragana alone are particles, katakana alone pieces of loanwords
    assert tokenize("は") == tokenize("ミ") == []
    assert tokenize("ねこ") == ["ねこ"]
    assert tokenize("猫") == ["猫"]


def test_a_one_character_word_is_found_inside_a_longer_run() -> None:
    question, note = set(tokenize("猫")), set(tokenize("私は猫が好きです"))
    assert question <= note


def test_mixed_text_is_tokenized_run_by_run() -> None:
    # the emoji ends one CJK run and a new one starts after it
    assert tokenize("Misoは猫🐱です!") == ["miso", "は猫", "猫", "です"]


def test_hangul_and_katakana_runs_split_at_the_middle_dot() -> None:
    assert tokenize("김치") == ["김", "김치", "치"]
    assert tokenize("ミソ・スープ") == ["ミソ", "スー", "ープ"]
    assert tokenize("김치를") == ["김", "김치", "치", "치를", "를"]


def test_width_variants_fold_to_one_form() -> None:
    assert tokenize("ＧＲＥＥＮ ｔｅａ") == tokenize("green tea")
    assert tokenize("ﾐｿ") == tokenize("ミソ") == ["ミソ"]
    assert tokenize("Straße") == tokenize("STRASSE")


def test_emoji_punctuation_markup_and_empty_text_give_no_tokens() -> None:
    assert tokenize("") == []
    assert tokenize("🍣🎉👍🏽 !!! ...") == []
    assert tokenize("<@1000> <@!22> <#300> <@&4> <:miso:123> <a:dance:456>") == []
    assert tokenize("<@1000> hi") == ["hi"]


def test_repeats_are_kept_as_term_frequency() -> None:
    assert tokenize("tea, tea and TEA") == ["tea", "tea", "and", "tea"]


@given(st.text())
def test_any_text_tokenizes_to_tokens_that_carry_no_separator(text: str) -> None:
    for token in tokenize(text):
        # search_keys joins scope and token with a space: no token may hold one
        assert token and not any(c.isspace() for c in token)


def test_a_query_keeps_each_token_once_at_its_strongest_weight() -> None:
    query = Query.of([("how is Miso", 1.0), ("Miso and tuna", 0.5)])
    assert dict(zip(query.terms, query.weights, strict=True)) == {
        "how": 1.0,
        "is": 1.0,
        "miso": 1.0,
        "and": 0.5,
        "tuna": 0.5,
    }
    assert Query.of([("🎉", 1.0)]).empty


def reference(text: str) -> list[str]:
    """The tokenizer's definition, character by character (the module does it by regex)."""
    folded = tokens_module._MARKUP.sub(" ", unicodedata.normalize("NFKC", text).casefold())
    found: list[str] = []
    run: list[str] = []
    run_is_cjk = False
    for char in [*folded, " "]:
        cjk = is_cjk(char)
        word = char.isalnum() or unicodedata.category(char).startswith("M")
        if run and (not (cjk or word) or cjk != run_is_cjk):
            joined = "".join(run)
            found += tokens_module._cjk_tokens(joined) if run_is_cjk else [_fold(joined)]
            run = []
        if cjk or word:
            run_is_cjk = cjk
            run.append(char)
    return found


@given(st.text(alphabet=st.characters(max_codepoint=0xFFFF)))
def test_the_tokenizer_does_what_its_definition_says(text: str) -> None:
    assert tokenize(text) == reference(text)


def test_the_definition_holds_on_every_script_at_hand() -> None:
    for text in (
        "Misoは猫🐱です! ＧＲＥＥＮ",
        "हिन्दी भाषा",
        "naïve café_x",
        "김치를 ミソ・スープ 3匹",
    ):
        assert tokenize(text) == reference(text)
