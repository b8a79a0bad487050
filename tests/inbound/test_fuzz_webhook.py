"""Fuzz POST /webhook: generated and mutated gateway frames against the real app, Postgres, Redis.

Properties: the answer is 200 (ok/duplicate/ignored), 401, 413 or 422, never another 5xx;
a refused frame records nothing; a 200 ``ok`` records exactly one inbox row."""

from __future__ import annotations

import asyncio
import json
import math
from collections import Counter
from collections.abc import AsyncIterator, Callable, Coroutine
from dataclasses import dataclass, field
from datetime import UTC
from typing import Any

import httpx
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from redis.asyncio import Redis
from sqlalchemy import func, select

from app.config import Settings
from app.db import SessionFactory
from app.main import create_app
from app.models.inbox import InboxEvent
from tests.support.servers import serve

TOKEN_VALUE = "test-gateway-token-3d9f1c7a5b2e8064"
TOKEN = {"x-discord-gateway-token": TOKEN_VALUE}
MAX_BODY = 1024 * 1024
ANSWERS = {200, 401, 413, 422}
FUZZ = settings(max_examples=150, deadline=None)

# ---------------------------------------------------------------------------------------------
# Generators: valid frames of every handled type, then mutations of them.
# ---------------------------------------------------------------------------------------------

snowflakes = st.integers(min_value=0, max_value=2**63 - 1).map(str)
# Storable text: any Unicode scalar value except NUL (Postgres jsonb refuses \u0000).
texts = st.text(st.characters(codec="utf-8", exclude_characters="\x00"), max_size=30)
timestamps = st.datetimes(timezones=st.just(UTC)).map(lambda t: t.isoformat())
guild = st.one_of(st.none(), snowflakes)


def _drop_none(d: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in d.items() if v is not None}


users = st.builds(
    lambda i, name, gname, bot: _drop_none(
        {"id": i, "username": name, "global_name": gname, "bot": bot}
    ),
    snowflakes,
    texts,
    st.one_of(st.none(), texts),
    st.one_of(st.none(), st.booleans()),
)
emojis = st.builds(lambda i, name: {"id": i, "name": name}, st.one_of(st.none(), snowflakes), texts)

message_create = st.builds(
    lambda i, ch, g, author, nick, roles, content, ts, mentions, ref: _drop_none(
        {
            "id": i,
            "channel_id": ch,
            "guild_id": g,
            "author": author,
            "member": {"nick": nick, "roles": roles} if g is not None else None,
            "content": content,
            "timestamp": ts,
            "mentions": mentions,
            "message_reference": {"message_id": ref, "channel_id": ch} if ref else None,
            "referenced_message": {"id": ref} if ref else None,
        }
    ),
    snowflakes,
    snowflakes,
    guild,
    users,
    st.one_of(st.none(), texts),
    st.lists(snowflakes, max_size=3),
    texts,
    timestamps,
    st.lists(users, max_size=2),
    st.one_of(st.none(), snowflakes),
)
message_update = st.builds(
    lambda i, ch, g, content, edited: _drop_none(
        {"id": i, "channel_id": ch, "guild_id": g, "content": content, "edited_timestamp": edited}
    ),
    snowflakes,
    snowflakes,
    guild,
    st.one_of(st.none(), texts),
    st.one_of(st.none(), timestamps),
)
message_delete = st.builds(
    lambda i, ch, g: _drop_none({"id": i, "channel_id": ch, "guild_id": g}),
    snowflakes,
    snowflakes,
    guild,
)
message_delete_bulk = st.builds(
    lambda ids, ch, g: _drop_none({"ids": ids, "channel_id": ch, "guild_id": g}),
    st.lists(snowflakes, min_size=1, max_size=5),
    snowflakes,
    guild,
)
reaction = st.builds(
    lambda u, ch, m, g, e, author: _drop_none(
        {
            "user_id": u,
            "channel_id": ch,
            "message_id": m,
            "guild_id": g,
            "emoji": e,
            "message_author_id": author,
        }
    ),
    snowflakes,
    snowflakes,
    snowflakes,
    guild,
    emojis,
    st.one_of(st.none(), snowflakes),
)
reaction_remove_all = st.builds(
    lambda ch, m, g: _drop_none({"channel_id": ch, "message_id": m, "guild_id": g}),
    snowflakes,
    snowflakes,
    guild,
)
reaction_remove_emoji = st.builds(
    lambda ch, m, g, e: _drop_none({"channel_id": ch, "message_id": m, "guild_id": g, "emoji": e}),
    snowflakes,
    snowflakes,
    guild,
    emojis,
)

DATA: dict[str, st.SearchStrategy[dict[str, Any]]] = {
    "MESSAGE_CREATE": message_create,
    "MESSAGE_UPDATE": message_update,
    "MESSAGE_DELETE": message_delete,
    "MESSAGE_DELETE_BULK": message_delete_bulk,
    "MESSAGE_REACTION_ADD": reaction,
    "MESSAGE_REACTION_REMOVE": reaction,
    "MESSAGE_REACTION_REMOVE_ALL": reaction_remove_all,
    "MESSAGE_REACTION_REMOVE_EMOJI": reaction_remove_emoji,
}


@st.composite
def valid_frames(draw: st.DrawFn) -> dict[str, Any]:
    t = draw(st.sampled_from(sorted(DATA)))
    frame: dict[str, Any] = {"t": t, "d": draw(DATA[t])}
    # `op` and `s` may be absent (as in the gateway protocol).
    if draw(st.booleans()):
        frame["op"] = 0
    if draw(st.booleans()):
        frame["s"] = draw(st.integers(min_value=0, max_value=2**31))
    return frame


def _nested(depth: int, leaf: object, as_list: bool) -> object:
    value = leaf
    for _ in range(depth):
        value = [value] if as_list else {"x": value}
    return value


def _surrogate_text() -> st.SearchStrategy[str]:
    lone = st.integers(min_value=0xD800, max_value=0xDFFF).map(chr)
    return st.builds(lambda a, s, b: a + s + b, texts, lone, texts)


non_numeric_snowflakes = st.one_of(
    st.sampled_from(["", " 1", "1 ", "-1", "+1", "1.0", "1e3", "0x10", "١٢٣", "１２３", "NaN"]),
    st.integers(min_value=2**63, max_value=2**80).map(str),
    st.integers(min_value=-(2**80), max_value=-1).map(str),
    # Long digit strings: as a JSON *string* the parser must refuse them, never crash.
    st.integers(min_value=1, max_value=6000).map(lambda n: "9" * n),
)
junk: st.SearchStrategy[object] = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(10**100), max_value=10**100),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([math.nan, math.inf, -math.inf]),
    non_numeric_snowflakes,
    texts,
    _surrogate_text(),
    st.text(max_size=5).map(lambda s: s + "\x00"),
    st.lists(st.integers(), max_size=3),
    st.dictionaries(texts, st.integers(), max_size=3),
    st.builds(_nested, st.integers(min_value=1, max_value=300), st.integers(), st.booleans()),
)


def _paths(value: object, prefix: tuple[str | int, ...] = ()) -> list[tuple[str | int, ...]]:
    found: list[tuple[str | int, ...]] = [prefix] if prefix else []
    if isinstance(value, dict):
        for key, child in value.items():
            found += _paths(child, (*prefix, key))
    elif isinstance(value, list):
        for index, child in enumerate(value):
            found += _paths(child, (*prefix, index))
    return found


def _parent(frame: dict[str, Any], path: tuple[str | int, ...]) -> Any:
    node: Any = frame
    for step in path[:-1]:
        node = node[step]
    return node


@st.composite
def mutated_frames(draw: st.DrawFn) -> dict[str, Any]:
    """A valid frame with one to three fields replaced, removed or added."""
    frame = draw(valid_frames())
    for _ in range(draw(st.integers(min_value=1, max_value=3))):
        # `t` is mutated separately below: most mutations should reach a handled type's fields.
        paths = [p for p in _paths(frame) if p[0] != "t"]
        if not paths:
            break  # `d` itself was removed
        path = draw(st.sampled_from(paths))
        parent = _parent(frame, path)
        action = draw(st.sampled_from(["replace", "remove", "add"]))
        if action == "remove" and isinstance(parent, dict):
            del parent[path[-1]]
        elif action == "add" and isinstance(parent, dict):
            parent[draw(texts)] = draw(junk)
        else:
            parent[path[-1]] = draw(junk)
    # One frame in ten gets a wrong `t` too (integers would favour the boundary 0 far more).
    if draw(st.sampled_from([False] * 9 + [True])):
        frame["t"] = draw(st.one_of(st.sampled_from(sorted(DATA)).map(str.lower), junk))
    return frame


def encode(frame: object) -> bytes:
    # allow_nan: NaN/Infinity become the bare literals Python's parser accepts and JSON lacks;
    # ensure_ascii: lone surrogates become \udXXX escapes, as a relay could send them.
    return json.dumps(frame, allow_nan=True, ensure_ascii=True).encode()


@st.composite
def raw_bodies(draw: st.DrawFn) -> bytes:
    """Bytes a broken relay could send: truncated, corrupted or arbitrary."""
    good = encode(draw(valid_frames()))
    kind = draw(st.sampled_from(["truncated", "flipped", "random", "not-object", "literal"]))
    if kind == "truncated":
        return good[: draw(st.integers(min_value=0, max_value=len(good) - 1))]
    if kind == "flipped":
        index = draw(st.integers(min_value=0, max_value=len(good) - 1))
        return good[:index] + bytes([draw(st.integers(0, 255))]) + good[index + 1 :]
    if kind == "random":
        return draw(st.binary(max_size=200))
    if kind == "not-object":
        return encode(draw(st.one_of(st.lists(st.integers()), st.integers(), texts, st.none())))
    literal = draw(st.sampled_from([b"NaN", b"Infinity", b"-Infinity", b"1e999999", b"-0"]))
    text = good.decode()
    return text.replace('"d": {', '"d": {"n": ' + literal.decode() + ", ", 1).encode()


# ---------------------------------------------------------------------------------------------
# The harness: the real app on a real port; hypothesis runs in a thread, requests on the loop.
# ---------------------------------------------------------------------------------------------


@dataclass
class Harness:
    url: str
    sessions: SessionFactory
    loop: asyncio.AbstractEventLoop
    client: httpx.AsyncClient
    tally: Counter[str] = field(default_factory=Counter)

    async def inbox_count(self) -> int:
        async with self.sessions() as session:
            return int(await session.scalar(select(func.count()).select_from(InboxEvent)) or 0)

    def run(self, coro: Coroutine[Any, Any, None]) -> None:
        asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout=60)

    async def post(
        self, body: bytes | Any, headers: dict[str, Any] | None = None
    ) -> httpx.Response:
        response = await self.client.post(
            "/webhook", content=body, headers=TOKEN if headers is None else headers
        )
        self.tally[_label(response)] += 1
        return response


def _label(response: httpx.Response) -> str:
    """The answer, and for a 422 which stage refused it: JSON, the schema or the database."""
    if response.status_code == 200:
        return f"200 {response.json().get('status')}"
    if response.status_code == 422:
        problem = response.json()["problems"][0]
        if problem["field"] != "body":
            return "422 schema"
        return "422 unstorable" if "stored" in problem["problem"] else "422 json"
    return str(response.status_code)


def check_answer(response: httpx.Response) -> None:
    assert response.status_code in ANSWERS, (response.status_code, response.text[:300])
    if response.status_code == 200:
        assert response.json()["status"] in {"ok", "duplicate", "ignored"}
    else:
        assert "error" in response.json()


def check_recorded(response: httpx.Response, recorded: int) -> None:
    """Only a 200 ``ok`` records, and exactly one row."""
    is_ok = response.status_code == 200 and response.json()["status"] == "ok"
    assert recorded == (1 if is_ok else 0), (response.status_code, response.text[:300], recorded)


async def post_and_check(h: Harness, body: bytes, headers: dict[str, Any] | None = None) -> None:
    before = await h.inbox_count()
    response = await h.post(body, headers)
    check_answer(response)
    check_recorded(response, await h.inbox_count() - before)


@pytest.fixture
async def h(settings: Settings, sessions: SessionFactory, redis: Redis) -> AsyncIterator[Harness]:
    async with serve(create_app(settings)) as url, httpx.AsyncClient(base_url=url) as client:
        yield Harness(url, sessions, asyncio.get_running_loop(), client)


async def fuzz(h: Harness, prop: Callable[[], None]) -> None:
    """Run a hypothesis property in a thread so the app keeps serving on this loop."""
    await asyncio.to_thread(prop)
    print(f"\nwebhook answers: {dict(sorted(h.tally.items()))}")


async def test_valid_frames_are_recorded_once_and_replays_are_duplicates(h: Harness) -> None:
    @FUZZ
    @given(frame=valid_frames())
    def prop(frame: dict[str, Any]) -> None:
        async def go() -> None:
            body = encode(frame)
            before = await h.inbox_count()
            first = await h.post(body)
            check_answer(first)
            # A generated id may repeat an earlier example's: then it is a duplicate.
            assert first.status_code == 200 and first.json()["status"] in {"ok", "duplicate"}
            check_recorded(first, await h.inbox_count() - before)
            after_first = await h.inbox_count()
            replay = await h.post(body)
            assert replay.status_code == 200 and replay.json() == {"status": "duplicate"}
            check_recorded(replay, await h.inbox_count() - after_first)

        h.run(go())

    await fuzz(h, prop)
    assert h.tally["200 ok"] > 0


async def test_mutated_frames_never_5xx_and_refusals_record_nothing(h: Harness) -> None:
    @FUZZ
    @given(frame=mutated_frames())
    def prop(frame: dict[str, Any]) -> None:
        body = encode(frame)
        h.run(post_and_check(h, body))

    await fuzz(h, prop)
    assert h.tally["422 schema"] > 0


unstorable = st.one_of(
    st.sampled_from([math.nan, math.inf, -math.inf]),
    st.text(max_size=5).map(lambda s: s + "\x00"),
    _surrogate_text(),
)


@st.composite
def frames_with_unstorable_extras(draw: st.DrawFn) -> dict[str, Any]:
    """A valid frame plus an unknown field, somewhere in ``d``, Postgres jsonb cannot hold."""
    frame = draw(valid_frames())
    holders = [frame["d"]] + [
        node
        for path in _paths(frame["d"])
        if isinstance(node := _parent(frame["d"], (*path, "")), dict)
    ]
    holder = draw(st.sampled_from(holders))
    # A prefix keeps the new key clear of every field the parser knows.
    holder["x-" + draw(texts)] = draw(unstorable)
    return frame


async def test_unstorable_extras_are_422_and_record_nothing(h: Harness) -> None:
    @FUZZ
    @given(frame=frames_with_unstorable_extras())
    def prop(frame: dict[str, Any]) -> None:
        body = encode(frame)

        async def go() -> None:
            before = await h.inbox_count()
            response = await h.post(body)
            assert _label(response) == "422 unstorable", response.text[:300]
            assert await h.inbox_count() == before

        h.run(go())

    await fuzz(h, prop)


async def test_broken_bytes_never_5xx_and_record_nothing_unless_ok(h: Harness) -> None:
    @FUZZ
    @given(body=raw_bodies())
    def prop(body: bytes) -> None:
        h.run(post_and_check(h, body))

    await fuzz(h, prop)
    assert h.tally["422 json"] > 0


# Header values HTTP itself allows (RFC 9110 field-value: visible ASCII, obs-text, inner spaces);
# anything else is refused by the HTTP layer (400) before the app sees it.
_FIELD_BYTES = [*range(0x21, 0x7F), *range(0x80, 0x100)]
header_values = st.one_of(
    st.lists(st.sampled_from(_FIELD_BYTES), min_size=1, max_size=40).map(bytes),
    st.builds(
        lambda a, b: bytes(a) + b" " + bytes(b),
        st.lists(st.sampled_from(_FIELD_BYTES), min_size=1, max_size=20),
        st.lists(st.sampled_from(_FIELD_BYTES), min_size=1, max_size=20),
    ),
    st.sampled_from(
        [
            TOKEN_VALUE.upper(),
            TOKEN_VALUE[:-1],
            TOKEN_VALUE + "x",
            "x" + TOKEN_VALUE,
            f"Bearer {TOKEN_VALUE}",
            TOKEN_VALUE.replace("-", "_"),
        ]
    ).map(str.encode),
)
token_headers: st.SearchStrategy[dict[str, str | bytes]] = st.one_of(
    st.just({}),
    header_values.map(lambda v: {"x-discord-gateway-token": v}),
    # The right token under the wrong header name is no token.
    st.just({"authorization": TOKEN_VALUE, "x-gateway-token": TOKEN_VALUE}),
)


async def test_wrong_tokens_are_401_and_record_nothing(h: Harness) -> None:
    @FUZZ
    @given(headers=token_headers, frame=st.one_of(valid_frames(), mutated_frames()))
    def prop(headers: dict[str, Any], frame: dict[str, Any]) -> None:
        assume(headers.get("x-discord-gateway-token") != TOKEN_VALUE.encode())

        async def go() -> None:
            before = await h.inbox_count()
            response = await h.post(encode(frame), headers)
            assert response.status_code == 401, response.text[:300]
            assert await h.inbox_count() == before

        h.run(go())

    await fuzz(h, prop)


async def _chunks(body: bytes) -> AsyncIterator[bytes]:
    for start in range(0, len(body), 64 * 1024):
        yield body[start : start + 64 * 1024]


async def test_bodies_over_one_mib_are_413_streamed_or_not(h: Harness) -> None:
    @settings(max_examples=12, deadline=None)
    @given(
        frame=valid_frames(),
        excess=st.integers(min_value=-32, max_value=64),
        chunked=st.booleans(),
    )
    def prop(frame: dict[str, Any], excess: int, chunked: bool) -> None:
        # Pad with an unknown field, which the parser ignores, to exactly MAX_BODY + excess.
        skeleton = encode({**frame, "pad": ""})
        body = encode({**frame, "pad": "x" * (MAX_BODY + excess - len(skeleton))})
        assert len(body) == MAX_BODY + excess

        async def go() -> None:
            before = await h.inbox_count()
            # Without a Content-Length (chunked) the cap must hold while streaming.
            response = await h.post(_chunks(body) if chunked else body)
            check_answer(response)
            if excess > 0:
                assert response.status_code == 413
            else:
                assert response.status_code == 200
            check_recorded(response, await h.inbox_count() - before)

        h.run(go())

    await fuzz(h, prop)
    assert h.tally["413"] > 0


labelled_frames = st.one_of(
    valid_frames().map(lambda f: (f, True)), mutated_frames().map(lambda f: (f, False))
)


async def test_concurrent_mixed_frames_record_exactly_the_oks(h: Harness) -> None:
    """Group commit batches neighbours: a bad row must not fail or duplicate a good one."""

    @settings(max_examples=40, deadline=None)
    @given(frames=st.lists(labelled_frames, min_size=2, max_size=12))
    def prop(frames: list[tuple[dict[str, Any], bool]]) -> None:
        bodies = [encode(frame) for frame, _ in frames]

        async def go() -> None:
            before = await h.inbox_count()
            responses = await asyncio.gather(*(h.post(body) for body in bodies))
            for response in responses:
                check_answer(response)
            oks = sum(r.status_code == 200 and r.json()["status"] == "ok" for r in responses)
            assert await h.inbox_count() - before == oks
            # Every well-formed frame of the batch is acknowledged, whatever its neighbours.
            for (_, valid), response in zip(frames, responses, strict=True):
                if valid:
                    assert response.status_code == 200, response.text[:300]

        h.run(go())

    await fuzz(h, prop)


# ---------------------------------------------------------------------------------------------
# Known defects: minimal inputs, each a 500 today (the webhook may answer 422 here).
# ---------------------------------------------------------------------------------------------

DEFECTS = {
    "integer literal over 4300 digits": (
        b'{"t":"MESSAGE_DELETE","d":{"id":"1","channel_id":"2","n":' + b"1" * 4301 + b"}}"
    ),
    "nesting deeper than Python's recursion limit": (
        b'{"t":"MESSAGE_DELETE","d":{"id":"1","channel_id":"2","n":'
        + b"[" * 1000
        + b"]" * 1000
        + b"}}"
    ),
    "JSON that is not UTF-8 (UTF-16/32)": (
        '{"t":"MESSAGE_DELETE","d":{"id":"1","channel_id":"2"}}'.encode("utf-16")
    ),
    "MESSAGE_UPDATE content with a lone surrogate": (
        b'{"t":"MESSAGE_UPDATE","d":{"id":"1","channel_id":"2","content":"\\ud800"}}'
    ),
}


@pytest.mark.parametrize("name", sorted(DEFECTS))
async def test_inputs_that_once_answered_500_are_refused_with_422(h: Harness, name: str) -> None:
    body = DEFECTS[name]
    await post_and_check(h, body)
    assert sum(n for label, n in h.tally.items() if label.startswith("422")) == 1
