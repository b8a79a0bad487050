"""What tells a repeat in other words from a distinct fact (pure): the rule before the
decision model's same_memory question, in English and in Japanese."""

from __future__ import annotations

import pytest

from app.kit import japanese
from app.memory.duplicates import Difference, telling_difference

NAME, VALUE, NUMBER, NEGATION = (
    Difference.NAME,
    Difference.VALUE,
    Difference.NUMBER,
    Difference.NEGATION,
)


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("Sam is reading Dune.", "Sam is halfway through Dune."),
        ("Sam will compete in a triathlon in Porto.", "Sam signed up for the triathlon in Porto."),
        ("Sam is training for a chess match.", "Sam is preparing for the chess match."),
        ("Sam goes bouldering every Friday.", "Sam never misses bouldering on Friday."),
        ("Nothing beats ramen for Sam.", "Sam loves ramen more than anything."),
        ("Sam's favourite food is pho.", "Sam could eat pho every day."),
        ("Sam’s sister lives in Lyon.", "Sam's sister has a flat in Lyon."),
        # Japanese: common nouns (親友, 家, 予定, アレルギー) may go, names stay
        ("けんじの親友は健太", "健太はけんじの一番の友達"),
        ("けんじは7月に京都へ旅行する予定", "けんじは7月の京都旅行を予約した"),
        ("けんじのうさぎの名前はチャチャ", "けんじの家にはチャチャといううさぎがいる"),
        ("けんじはキウイを食べるとアレルギーが出る", "けんじはキウイが体質的にだめ"),
        ("けんじは毎週尺八のレッスンに通っている", "けんじは毎晩尺八を練習している"),
        ("けんじは長年星野印刷で翻訳者をしている", "けんじは星野印刷の翻訳者"),
        ("けんじは仙台のマラソン大会に申し込んだ", "けんじは仙台のマラソン大会に出場する"),
        ("けんじは1月にアイスランドに行く", "けんじは1月にアイスランドを訪れたいと思っている"),
        ("けんじは水曜日のヨガを欠かさない", "けんじは毎週水曜日にヨガをしている"),
    ],
)
def test_a_repeat_in_other_words_shows_no_telling_difference(old: str, new: str) -> None:
    assert telling_difference(old, new) is None
    assert telling_difference(new, old) is None


@pytest.mark.parametrize(
    ("old", "new", "difference"),
    [
        # a name, a place, an organisation of the old text is gone
        ("Sam's best friend is Zoe.", "Sam's closest friend is Kai.", NAME),
        ("Sam moved to Porto.", "Sam has lived in Lisbon for years.", NAME),
        ("Sam works as a nurse at Cedar Health.", "Sam is a nurse with Northwind.", NAME),
        # one value for another in the same sentence, words without capitals included
        ("Sam is allergic to almonds.", "Sam is allergic to kiwi.", VALUE),
        ("Sam goes climbing every Tuesday.", "Sam goes running every Tuesday.", VALUE),
        ("Sam works in a bakery in Leeds.", "Sam works at a hospital in Leeds.", VALUE),
        ("Sam is training for a triathlon.", "Sam is training for a hackathon.", VALUE),
        ("Sam quit her job at the bakery.", "Sam started a job at the bakery.", VALUE),
        ("Sam's older sister teaches.", "Sam's younger sister teaches.", VALUE),
        ("Sam lives in Tokyo.", "Sam works in Tokyo.", VALUE),  # a verb for another alone
        ("Sam plays the piano.", "Sam teaches the piano.", VALUE),
        # a number
        ("Sam's rent is 900 a month.", "Sam's rent went up to 950 a month.", NUMBER),
        ("Sam has 2 cats.", "Sam has cats.", NUMBER),
        # a negation, whichever side holds it; an affirming idiom beside a real negation
        ("Sam eats meat.", "Sam doesn't eat meat anymore.", NEGATION),
        ("Sam no longer eats meat.", "Sam eats meat.", NEGATION),
        ("Sam never misses yoga.", "Sam doesn't go to yoga anymore.", NEGATION),
        ("Nothing beats ramen for Sam.", "Sam can't stand ramen.", NEGATION),
        # Japanese
        ("けんじの兄は名古屋で教師をしている", "けんじの妹は福岡で看護師をしている", NAME),
        ("けんじの親友は健太", "けんじの一番の友達は拓也", NAME),
        ("けんじは愛とたこ焼きを食べた", "けんじは毎日でもたこ焼きを食べられる", NAME),
        ("けんじは星野印刷で働いている", "けんじは海風食品の社員", NAME),
        ("けんじのうさぎの名前はチャチャ", "けんじの家にはソラといううさぎがいる", NAME),
        ("けんじはピアノを習っている", "けんじはギターを習っている", VALUE),
        ("けんじはピアノを習っている", "けんじはピアノを教えている", VALUE),
        ("けんじは去年結婚した", "けんじは去年離婚した", VALUE),
        ("けんじはキウイでアレルギーが出る", "けんじはそばでアレルギーが出る", VALUE),
        ("けんじの好物はたこ焼き", "けんじの好物は餃子", VALUE),
        ("けんじの家では唐辛子が育っている", "けんじの家ではバジルが育っている", VALUE),
        ("けんじは7月に京都へ旅行する予定", "けんじは8月に京都へ旅行する予定", NUMBER),
        ("けんじは肉を食べる", "けんじはもう肉を食べない", NEGATION),
        ("けんじは水曜日のヨガを欠かさない", "けんじはもう水曜日にヨガをしていない", NEGATION),
        ("けんじは猫が好きではない", "けんじは猫が好き", NEGATION),
    ],
)
def test_a_distinct_fact_or_a_negation_is_told_apart(
    old: str, new: str, difference: Difference
) -> None:
    assert telling_difference(old, new) is difference


def test_the_dictionary_tells_japanese_names_from_common_nouns() -> None:
    assert japanese.names("けんじの親友は健太、家は那覇") == {"健太", "那覇"}
    assert japanese.names("けんじは7月に京都へ旅行する予定") == {"京都"}
    assert japanese.names("けんじは彩と家で猫を飼っている") == {"彩"}  # 彩 may be a given name
    assert japanese.names("Sam likes cats") == set()
