"""The OpenAI-compatible embeddings client against a fake on the real wire format: batches,
the input type, the length check, retries for stored texts and one attempt for a query;
and the rule that tells a distinct fact from a repeat (pure)."""

from __future__ import annotations

import httpx
import pytest

from app.config import InputType
from app.embeddings.base import EmbeddingFailed, Failure
from app.embeddings.client import OpenAICompatible, parse_vectors, reported_tokens
from app.embeddings.fake import FakeEmbeddings
from app.memory.duplicates import Difference, telling_difference
from tests.support.servers import serve


def client(http: httpx.AsyncClient, url: str, **options: object) -> OpenAICompatible:
    settings: dict[str, object] = {"model": "m", "dimensions": 32, "backoff_s": 0.0} | options
    return OpenAICompatible(http, base_url=f"{url}/v1", **settings)  # type: ignore[arg-type]


async def test_stored_texts_go_in_batches_as_documents_and_come_back_in_order() -> None:
    fake = FakeEmbeddings()
    async with serve(fake.app) as url, httpx.AsyncClient() as http:
        texts = [f"note number {n}" for n in range(70)]
        vectors = await client(http, url, input_type=InputType.FIELD).documents(texts)
    assert [len(body["input"]) for body in fake.requests] == [64, 6]
    assert {body["input_type"] for body in fake.requests} == {"document"}
    assert [list(v.values) for v in vectors] == [pytest.approx(fake.vector(t)) for t in texts]


async def test_a_query_is_marked_as_one_by_field_or_by_prefix() -> None:
    fake = FakeEmbeddings()
    async with serve(fake.app) as url, httpx.AsyncClient() as http:
        await client(http, url, input_type=InputType.FIELD).queries(["hi"], timeout_s=5)
        prefixed = client(http, url, input_type=InputType.PREFIX, prefixes=("query: ", "passage: "))
        await prefixed.queries(["hi"], timeout_s=5)
        await prefixed.documents(["hi"])
    field, query, document = fake.requests
    assert field["input_type"] == "query" and field["input"] == ["hi"]
    assert query["input"] == ["query: hi"] and document["input"] == ["passage: hi"]
    assert "input_type" not in query


@pytest.mark.parametrize(
    ("trouble", "failure"),
    [
        ({"down": True}, Failure.STATUS),
        ({"garbage": True}, Failure.MALFORMED),
        ({"dimensions_answered": 16}, Failure.DIMENSIONS),
    ],
)
async def test_a_bad_answer_is_a_failure_never_a_vector(
    trouble: dict[str, object], failure: Failure
) -> None:
    fake = FakeEmbeddings(**trouble)  # type: ignore[arg-type]
    async with serve(fake.app) as url, httpx.AsyncClient() as http:
        with pytest.raises(EmbeddingFailed) as query:
            await client(http, url).queries(["hi"], timeout_s=5)
        with pytest.raises(EmbeddingFailed) as stored:
            await client(http, url).documents(["hi"])
    assert query.value.failure is stored.value.failure is failure
    retried = 3 if failure is Failure.STATUS else 1  # a query is one attempt
    assert len(fake.requests) == 1 + retried


async def test_a_slow_query_times_out_in_its_own_short_time() -> None:
    fake = FakeEmbeddings(latency=1.0)
    async with serve(fake.app) as url, httpx.AsyncClient() as http:
        with pytest.raises(EmbeddingFailed) as failed:
            await client(http, url).queries(["hi"], timeout_s=0.1)
    assert failed.value.failure is Failure.TIMEOUT


@pytest.mark.parametrize(
    ("answer", "tokens"),
    [
        ({"usage": {"prompt_tokens": 7, "total_tokens": 7}}, 7),
        ({"usage": {"total_tokens": 5}}, 5),  # a server that names the total alone
        ({"usage": {"prompt_tokens": 0}}, 0),
        ({}, None),  # no usage: the bot estimates
        ({"usage": None}, None),
        ({"usage": {"prompt_tokens": -3}}, None),
        ({"usage": {"prompt_tokens": True}}, None),
        ({"usage": {"prompt_tokens": "7"}}, None),
        ([], None),
    ],
)
def test_the_tokens_an_answer_reports_are_read_only_when_they_are_a_count(
    answer: object, tokens: int | None
) -> None:
    assert reported_tokens(answer) == tokens


def test_an_answer_of_another_count_or_with_holes_is_malformed() -> None:
    good = [{"index": 0, "embedding": [0.1, 0.2]}]
    assert [v.values for v in parse_vectors(good, 1, 2, "s")] == [(0.1, 0.2)]
    for data in ([], [{"index": 0, "embedding": [0.1, None]}], [{"index": 3, "embedding": [1, 2]}]):
        with pytest.raises(EmbeddingFailed):
            parse_vectors(data, 1, 2, "s")


@pytest.mark.parametrize(
    ("old", "new", "difference"),
    [
        (
            "Sam's favourite snack is salted edamame",
            "Sam loves salted edamame more than any other snack",
            None,
        ),
        ("Sam has a cat named Miso", "Sam adopted a cat called Miso, a grey tabby", None),
        (
            "Sam has an older brother who teaches in Nagoya",
            "Sam has a younger sister who nurses in Fukuoka",
            Difference.NAME,
        ),
        ("Sam lives in Osaka", "Sam does not live in Osaka anymore", Difference.NEGATION),
        ("Sam's rent is 900 a month", "Sam's rent is 950 a month", Difference.NUMBER),
        ("Sam is allergic to peanuts", "Sam is allergic to kiwi", Difference.VALUE),
        # ミソ and モチ are words the dictionary knows (味噌, 餅): the swap tells them apart
        ("サムは猫のミソを飼っている", "サムは猫のモチを飼っている", Difference.VALUE),
        ("サムは猫のチャチャを飼っている", "サムの猫の名前はソラ", Difference.NAME),
        ("サムの好物はたこ焼き", "サムの好物は餃子", Difference.VALUE),
        ("サムは卵アレルギーがある", "サムは卵アレルギーがあって、薬を持ち歩いている", None),
        # "never misses" affirms: "no longer does" is the negation, "every week" is not
        (
            "サムは日曜日の卓球を欠かさない",
            "サムはもう日曜日に卓球をしていない",
            Difference.NEGATION,
        ),
        ("サムは日曜日の卓球を欠かさない", "サムは毎週日曜日に卓球をしている", None),
    ],
)
def test_what_differs_tells_a_distinct_fact_from_a_repeat(
    old: str, new: str, difference: Difference | None
) -> None:
    assert telling_difference(old, new) is difference
