"""Files under a size limit (app/kit/parts.py): every file within the limit and whole on its
own, nothing lost or reordered across files, and a clear refusal past the number of files."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.kit.parts import JsonFiles, TextFiles, TooLarge

ARRAYS = ("memories", "ledger")


def head(number: int) -> dict[str, Any]:
    return {"user_id": "7", "file": number, **({"first": True} if number == 1 else {})}


def json_files(
    memories: list[Any], ledger: list[Any], *, limit: int, max_files: int = 50
) -> list[dict[str, Any]]:
    with JsonFiles(limit=limit, max_files=max_files, head=head, arrays=ARRAYS) as out:
        out.add("memories", iter(memories))
        out.add("ledger", iter(ledger))
        files = out.finish()
        raw = [f.read() for f in files]
    assert [f.number for f in files] == list(range(1, len(files) + 1))
    assert [f.size for f in files] == [len(r) for r in raw]
    assert all(len(r) <= limit for r in raw)
    return [json.loads(r) for r in raw]


items = st.lists(
    st.one_of(
        st.integers(),
        st.text(max_size=40),
        st.dictionaries(st.text(max_size=5), st.text(max_size=20), max_size=3),
    ),
    max_size=40,
)


@settings(max_examples=200, deadline=None)
@given(items, items, st.integers(min_value=700, max_value=2000))
def test_json_files_are_each_whole_and_within_the_limit_and_lose_nothing(
    memories: list[Any], ledger: list[Any], limit: int
) -> None:
    documents = json_files(memories, ledger, limit=limit)

    assert [d["file"] for d in documents] == list(range(1, len(documents) + 1))
    assert documents[0]["first"] is True and all("first" not in d for d in documents[1:])
    assert all(set(d) >= {"user_id", "memories", "ledger"} for d in documents)
    assert [m for d in documents for m in d["memories"]] == memories
    assert [r for d in documents for r in d["ledger"]] == ledger


def test_a_document_that_fits_is_one_file_like_json_dumps_would_write() -> None:
    [document] = json_files([{"id": 1}], [{"id": 2, "action": "add"}], limit=10_000)

    assert document == {**head(1), "memories": [{"id": 1}], "ledger": [{"id": 2, "action": "add"}]}


def test_an_empty_document_is_one_file_with_empty_arrays() -> None:
    assert json_files([], [], limit=1000) == [{**head(1), "memories": [], "ledger": []}]


def test_files_fill_up_to_the_limit_before_the_next_starts() -> None:
    entry = "x" * 90
    documents = json_files([entry] * 100, [], limit=1000)

    sizes = [len(json.dumps(d, ensure_ascii=False).encode()) for d in documents]
    assert all(size > 1000 - 100 for size in sizes[:-1])  # not one more entry would fit
    assert len(documents) == 11


def test_more_files_than_allowed_is_too_large() -> None:
    with pytest.raises(TooLarge) as refused:
        json_files(["x" * 90] * 100, [], limit=1000, max_files=3)
    assert (refused.value.limit, refused.value.max_files) == (1000, 3)


def test_an_item_larger_than_a_file_is_too_large() -> None:
    with pytest.raises(TooLarge):
        json_files(["x" * 2000], [], limit=1000)


def test_arrays_are_filled_in_their_order() -> None:
    with JsonFiles(limit=1000, max_files=2, head=head, arrays=ARRAYS) as out:
        out.add("ledger", [1])
        with pytest.raises(ValueError, match="comes before"):
            out.add("memories", [2])


def test_text_files_hold_whole_lines_within_the_limit() -> None:
    lines = [f"line {n} " + "é" * (n % 30) for n in range(500)]
    with TextFiles(limit=2000, max_files=50) as out:
        out.add(lines[:250])
        out.add(lines[250:])
        raw = [f.read() for f in out.finish()]

    assert all(len(r) <= 2000 for r in raw)
    assert [line for r in raw for line in r.decode().splitlines()] == lines


def test_files_are_gone_once_the_writer_is_closed() -> None:
    with TextFiles(limit=100, max_files=5) as out:
        out.add(["a line"] * 40)
        files = out.finish()
    with pytest.raises(ValueError):
        files[0].read()
