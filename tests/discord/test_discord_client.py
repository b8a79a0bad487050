"""The Discord REST client against FakeDiscord on a real local port: splitting, nonces,
replies, reactions, rate limits, retries and typed errors."""

from __future__ import annotations

import re
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from redis.asyncio import Redis

from app.discord.client import ALLOWED_MENTIONS, USER_AGENT, DiscordClient, InteractionWebhook
from app.discord.errors import (
    DiscordAlreadyAcknowledged,
    DiscordDMClosed,
    DiscordError,
    DiscordInteractionGone,
    DiscordMissingAccess,
    DiscordNotFound,
    DiscordRateLimited,
    DiscordUnavailable,
)
from app.discord.fake import FakeDiscord, Reaction
from app.discord.refusals import REFUSAL_TTL_S, LocalRefusals, RedisRefusals
from app.discord.split import message_nonce, split_message
from tests.support.servers import free_port, serve

TOKEN = "fake-token-abcdef123456"


@dataclass
class FakeTime:
    """Records the client's waits; the clock moves only when ``advance`` is set."""

    advance: bool = True
    now: float = 1000.0
    waits: list[float] = field(default_factory=list)

    def clock(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.waits.append(seconds)
        if self.advance:
            self.now += seconds


@dataclass
class Rig:
    fake: FakeDiscord
    url: str
    http: httpx.AsyncClient
    time: FakeTime

    def client(self, *, token: str = TOKEN, url: str | None = None, **kw: Any) -> DiscordClient:
        return DiscordClient(
            self.http,
            token=token,
            api_base=url or self.url,
            sleep=self.time.sleep,
            clock=self.time.clock,
            **kw,
        )

    def statuses(self) -> list[int]:
        return [c.status for c in self.fake.calls]


@pytest.fixture
async def rig() -> AsyncIterator[Rig]:
    fake = FakeDiscord(token=TOKEN)
    async with serve(fake.app) as url, httpx.AsyncClient() as http:
        yield Rig(fake, url, http, FakeTime())


# -- splitting (pure) ---------------------------------------------------------------------------


def _nonspace(text: str) -> str:
    return re.sub(r"\s", "", text)


def _assert_in_order(parts: list[str], content: str) -> None:
    """Each part appears in ``content`` after the previous one, with only whitespace between."""
    position = 0
    for part in parts:
        found = content.find(part, position)
        assert found >= 0, part
        assert content[position:found].strip() == ""
        position = found + len(part)
    assert content[position:].strip() == ""


def test_short_message_is_one_part_and_blank_has_none() -> None:
    assert split_message("hello") == ["hello"]
    assert split_message("x" * 2000) == ["x" * 2000]
    assert split_message("  \n\n ") == []


def test_paragraph_break_wins_over_later_line_breaks() -> None:
    a, b, c = "a" * 1200, "b" * 300, "c" * 1000
    assert split_message(f"{a}\n\n{b}\n{c}") == [a, f"{b}\n{c}"]


def test_falls_back_from_line_to_sentence_to_space_to_hard_cut() -> None:
    assert split_message("aaaa aaaa aaaa\nbbbbbbbbbb", 20) == ["aaaa aaaa aaaa", "bbbbbbbbbb"]
    assert split_message("One two three. Four five six seven.", 20) == [
        "One two three.",
        "Four five six seven.",
    ]
    assert split_message("alpha beta gamma delta epsilon", 12) == [
        "alpha beta",
        "gamma delta",
        "epsilon",
    ]
    assert split_message("x" * 45, 20) == ["x" * 20, "x" * 20, "x" * 5]


def test_a_4500_character_message_becomes_three_parts_losing_nothing() -> None:
    words = [f"word{i}" for i in range(900)]
    content = " ".join(words)[:4500]
    assert len(content) == 4500
    parts = split_message(content)
    assert len(parts) == 3
    assert all(0 < len(p) <= 2000 for p in parts)
    _assert_in_order(parts, content)
    assert _nonspace("".join(parts)) == _nonspace(content)


@settings(max_examples=300, deadline=None)
@given(content=st.text(alphabet="ab .!\n", max_size=400), limit=st.integers(5, 60))
def test_parts_are_never_empty_or_too_long_and_lose_only_whitespace(
    content: str, limit: int
) -> None:
    parts = split_message(content, limit)
    assert all(p.strip() and len(p) <= limit for p in parts)
    _assert_in_order(parts, content)
    assert _nonspace("".join(parts)) == _nonspace(content)


def test_code_fence_is_closed_and_reopened_across_parts() -> None:
    code = "\n".join(f"value_{i} = compute({i})" for i in range(300))
    content = f"Here you go:\n\n```python\n{code}\n```\nDone."
    parts = split_message(content)
    assert len(parts) >= 3
    for index, part in enumerate(parts):
        assert len(part) <= 2000
        fence_lines = [line for line in part.split("\n") if line.startswith("```")]
        assert len(fence_lines) % 2 == 0, index
        if index > 0:
            assert part.startswith("```python\n")
    assert parts[-1].endswith("```\nDone.")
    # Only the added fence lines differ from the original.
    body = "\n".join(parts).replace("\n```\n```python\n", "\n")
    assert _nonspace(body) == _nonspace(content)


def test_nonce_is_deterministic_short_and_distinct_per_key_channel_and_part() -> None:
    nonce = message_nonce("event-1", 55, 0)
    assert nonce == message_nonce("event-1", 55, 0)
    assert 0 < len(nonce) <= 25
    others = {message_nonce("event-2", 55, 0), message_nonce("event-1", 56, 0)}
    others.add(message_nonce("event-1", 55, 1))
    assert nonce not in others and len(others) == 3


# -- calls and wire format ----------------------------------------------------------------------


async def test_get_me_and_gateway(rig: Rig) -> None:
    client = rig.client()
    me = await client.get_me()
    assert me["id"] == "1000" and me["bot"] is True
    gateway = await client.get_gateway()
    assert gateway["shards"] == 1 and gateway["url"].startswith("wss://")


async def test_sends_auth_user_agent_and_a_timeout() -> None:
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(200, json={"id": "1"})

    async with httpx.AsyncClient(transport=httpx.MockTransport(handler)) as http:
        await DiscordClient(http, token=TOKEN, api_base="https://d.test/api/v10/").get_me()
    (request,) = seen
    assert str(request.url) == "https://d.test/api/v10/users/@me"
    assert request.headers["authorization"] == f"Bot {TOKEN}"
    assert request.headers["user-agent"] == USER_AGENT
    assert re.fullmatch(r"DiscordBot \(\S+, \S+\)", USER_AGENT)
    assert request.extensions["timeout"]["read"] == 10.0


async def test_long_reply_is_split_and_only_the_first_part_references(rig: Rig) -> None:
    content = " ".join(f"word{i}" for i in range(900))[:4500]
    ids = await rig.client().send_message(55, content, nonce_key="ev-1", reply_to=77)
    posted = rig.fake.messages_in(55)
    assert ids == [int(m["id"]) for m in posted] and ids == sorted(ids) and len(ids) == 3
    assert posted[0]["message_reference"] == {"message_id": "77", "fail_if_not_exists": False}
    assert [m["message_reference"] for m in posted[1:]] == [None, None]
    assert _nonspace("".join(m["content"] for m in posted)) == _nonspace(content)
    bodies = [c.json for c in rig.fake.calls_to("POST", "/channels/55/messages")]
    assert [b["nonce"] for b in bodies] == [message_nonce("ev-1", 55, i) for i in range(3)]
    assert all(b["enforce_nonce"] is True for b in bodies)
    assert all(b["allowed_mentions"] == ALLOWED_MENTIONS for b in bodies)
    assert ALLOWED_MENTIONS == {"parse": ["users"], "replied_user": True}


async def test_resending_the_same_parts_creates_no_duplicates(rig: Rig) -> None:
    client = rig.client()
    content = "para one. " * 150 + "\n\n" + "para two. " * 150
    first = await client.send_message(55, content, nonce_key="ev-2")
    again = await client.send_message(55, content, nonce_key="ev-2")
    assert again == first and len(first) == 2
    assert len(rig.fake.posted) == 2
    assert len(rig.fake.calls_to("POST", "/channels/55/messages")) == 4
    other = await client.send_message(55, "para one.", nonce_key="ev-3")
    assert other != first[:1] and len(rig.fake.posted) == 3


async def test_a_retry_after_a_lost_response_does_not_post_twice(rig: Rig) -> None:
    rig.fake.fail_next("POST /channels/5/messages", 502, after=True)
    ids = await rig.client().send_message(5, "hi", nonce_key="ev-20")
    assert rig.statuses() == [502, 200]
    assert [int(m["id"]) for m in rig.fake.posted] == ids and len(ids) == 1


@pytest.mark.parametrize(
    ("emoji", "segment", "recorded"),
    [
        ("👍", "%F0%9F%91%8D", "👍"),
        ("❤️", "%E2%9D%A4%EF%B8%8F", "❤️"),
        ("blob:123", "blob:123", "blob:123"),
        ("<:blob:123>", "blob:123", "blob:123"),
        ("<a:dance:456>", "dance:456", "dance:456"),
    ],
)
async def test_reaction_emoji_is_encoded_in_the_path(
    rig: Rig, emoji: str, segment: str, recorded: str
) -> None:
    await rig.client().add_reaction(5, 9, emoji)
    (call,) = rig.fake.calls
    assert (call.method, call.path) == ("PUT", f"/channels/5/messages/9/reactions/{segment}/@me")
    assert rig.fake.reactions == [Reaction(5, 9, recorded)]


async def test_reactions_are_idempotent_and_calls_keep_their_order(rig: Rig) -> None:
    client = rig.client()
    await client.add_reaction(5, 9, "👀")
    await client.add_reaction(5, 9, "👀")
    await client.send_message(5, "hi", nonce_key="ev-4", reply_to=9)
    assert rig.fake.reactions_on(9) == ["👀"]
    assert [c.method for c in rig.fake.calls] == ["PUT", "PUT", "POST"]
    assert rig.fake.calls[0].at <= rig.fake.calls[2].at


async def test_dm_opens_a_channel_once_and_posts_there(rig: Rig) -> None:
    client = rig.client()
    await client.send_dm(42, "hello", nonce_key="ev-5")
    await client.send_dm(42, "again", nonce_key="ev-6")
    assert [m["content"] for m in rig.fake.dms_to(42)] == ["hello", "again"]
    assert len(rig.fake.calls_to("POST", "/users/@me/channels")) == 1
    assert rig.fake.calls_to("POST", "/users/@me/channels")[0].json == {"recipient_id": "42"}


# -- rate limits and retries --------------------------------------------------------------------


async def test_429_waits_retry_after_then_succeeds(rig: Rig) -> None:
    rig.fake.fail_next("POST /channels/5/messages", 429, retry_after=1.5)
    ids = await rig.client().send_message(5, "hi", nonce_key="ev-7")
    assert rig.time.waits == [1.5]
    assert rig.statuses() == [429, 200]
    assert [int(m["id"]) for m in rig.fake.posted] == ids


async def test_global_429_pauses_every_route(rig: Rig) -> None:
    rig.time.advance = False  # the pause is still running when the next route is called
    rig.fake.fail_next("POST /channels/5/messages", 429, retry_after=2.0, is_global=True)
    client = rig.client()
    await client.send_message(5, "hi", nonce_key="ev-8")
    await client.send_message(6, "hi", nonce_key="ev-8")
    assert rig.time.waits == [2.0, 2.0]


async def test_route_429_pauses_only_its_bucket(rig: Rig) -> None:
    rig.time.advance = False
    rig.fake.fail_next("POST /channels/5/messages", 429, retry_after=2.0)
    client = rig.client()
    await client.send_message(5, "hi", nonce_key="ev-9")
    await client.send_message(6, "hi", nonce_key="ev-9")
    await client.add_reaction(5, 1, "👍")
    assert rig.time.waits == [2.0]


async def test_exhausted_bucket_waits_before_its_next_call_only(rig: Rig) -> None:
    rig.fake.exhaust_next("POST /channels/5/messages", reset_after=3.0)
    client = rig.client()
    await client.send_message(5, "one", nonce_key="ev-10")
    await client.send_message(6, "other channel", nonce_key="ev-10")
    await client.add_reaction(5, 1, "👍")
    assert rig.time.waits == []
    rig.time.now += 1.0  # time passes between calls: only the rest is waited
    await client.send_message(5, "two", nonce_key="ev-11")
    await client.send_message(5, "three", nonce_key="ev-12")
    assert rig.time.waits == [2.0]


async def test_reactions_in_a_channel_share_one_bucket(rig: Rig) -> None:
    rig.fake.exhaust_next("PUT /channels/5/messages/1/reactions", reset_after=0.75)
    client = rig.client()
    await client.add_reaction(5, 1, "👍")
    await client.add_reaction(6, 2, "👍")
    assert rig.time.waits == []
    await client.add_reaction(5, 2, "🎉")
    assert rig.time.waits == [0.75]


async def test_5xx_is_retried_with_backoff(rig: Rig) -> None:
    rig.fake.fail_next("POST /channels/5/messages", 502, count=2)
    await rig.client().send_message(5, "hi", nonce_key="ev-13")
    assert rig.statuses() == [502, 502, 200]
    assert rig.time.waits == [0.5, 1.0]
    assert len(rig.fake.posted) == 1


async def test_persistent_5xx_raises_unavailable_after_max_attempts(rig: Rig) -> None:
    rig.fake.fail_next("/channels/5", 500, count=10)
    with pytest.raises(DiscordUnavailable) as caught:
        await rig.client(max_attempts=4).send_message(5, "hi", nonce_key="ev-14")
    assert caught.value.status == 500
    assert rig.statuses() == [500] * 4
    assert rig.time.waits == [0.5, 1.0, 2.0]


async def test_persistent_429_raises_rate_limited(rig: Rig) -> None:
    rig.fake.fail_next("POST /channels/5/messages", 429, retry_after=0.25, count=10)
    with pytest.raises(DiscordRateLimited):
        await rig.client(max_attempts=3).send_message(5, "hi", nonce_key="ev-15")
    assert rig.statuses() == [429] * 3
    assert rig.time.waits == [0.25, 0.25]


async def test_429_longer_than_we_will_wait_fails_at_once(rig: Rig) -> None:
    rig.fake.fail_next("POST /channels/5/messages", 429, retry_after=3600)
    with pytest.raises(DiscordRateLimited):
        await rig.client().send_message(5, "hi", nonce_key="ev-16")
    assert rig.statuses() == [429] and rig.time.waits == []


async def test_connection_errors_become_unavailable_without_the_token(rig: Rig) -> None:
    client = rig.client(url=f"http://127.0.0.1:{free_port()}", max_attempts=3)
    with pytest.raises(DiscordUnavailable) as caught:
        await client.get_me()
    assert caught.value.status is None
    assert rig.time.waits == [0.5, 1.0]
    assert TOKEN not in str(caught.value) and TOKEN not in repr(caught.value)
    assert TOKEN not in repr(client)


# -- typed errors -------------------------------------------------------------------------------


async def test_closed_dms_raise_dm_closed(rig: Rig) -> None:
    rig.fake.dm_closed.add(42)
    with pytest.raises(DiscordDMClosed) as caught:
        await rig.client().send_dm(42, "hello", nonce_key="ev-17")
    assert (caught.value.status, caught.value.code) == (403, 50007)
    assert rig.fake.dms_to(42) == []
    assert rig.statuses() == [200, 403]  # not retried


@pytest.mark.parametrize("code", [50001, 50013])
async def test_403_raises_missing_access_without_retry(rig: Rig, code: int) -> None:
    rig.fake.fail_next("POST /channels/7/messages", 403, code=code)
    with pytest.raises(DiscordMissingAccess) as caught:
        await rig.client().send_message(7, "hi", nonce_key="ev-18")
    assert caught.value.code == code and rig.statuses() == [403]


async def test_channel_without_access_raises_missing_access(rig: Rig) -> None:
    rig.fake.missing_access.add(7)
    with pytest.raises(DiscordMissingAccess) as caught:
        await rig.client().add_reaction(7, 1, "👍")
    assert (caught.value.status, caught.value.code) == (403, 50001)


async def test_unknown_channel_and_message_raise_not_found(rig: Rig) -> None:
    rig.fake.unknown_channels.add(8)
    client = rig.client()
    with pytest.raises(DiscordNotFound) as caught:
        await client.send_message(8, "hi", nonce_key="ev-19")
    assert (caught.value.status, caught.value.code) == (404, 10003)
    rig.fake.strict_messages = True
    with pytest.raises(DiscordNotFound) as caught:
        await client.add_reaction(9, 12345, "👍")
    assert caught.value.code == 10008
    known = rig.fake.seed_message(9, "hello bot", author_id=42)
    await client.add_reaction(9, known, "👍")
    assert rig.fake.reactions_on(known) == ["👍"]


async def test_a_refused_dm_is_not_asked_again_until_the_refusal_lapses(rig: Rig) -> None:
    rig.fake.dm_closed.add(42)
    client = rig.client()
    for _ in range(3):
        with pytest.raises(DiscordDMClosed) as caught:
            await client.send_dm(42, "hello", nonce_key="ev-20")
        assert (caught.value.status, caught.value.code) == (403, 50007)
    assert rig.statuses() == [200, 403]  # the DM channel opened once, refused once
    rig.time.now += REFUSAL_TTL_S + 1
    rig.fake.dm_closed.clear()
    await client.send_dm(42, "hello again", nonce_key="ev-21")
    assert [m["content"] for m in rig.fake.dms_to(42)] == ["hello again"]


async def test_missing_access_holds_for_its_channel_and_route_only(rig: Rig) -> None:
    rig.fake.missing_access.add(7)
    client = rig.client()
    for _ in range(2):
        with pytest.raises(DiscordMissingAccess):
            await client.add_reaction(7, 1, "👍")
    rig.fake.missing_access.clear()
    await client.send_message(7, "posting is another route", nonce_key="ev-22")
    await client.add_reaction(8, 1, "👍")  # another channel
    assert rig.statuses() == [403, 200, 204]


async def test_a_404_is_remembered_for_its_exact_path(rig: Rig) -> None:
    rig.fake.strict_messages = True
    client = rig.client()
    for _ in range(2):
        with pytest.raises(DiscordNotFound):
            await client.add_reaction(9, 12345, "👍")
    known = rig.fake.seed_message(9, "hello bot", author_id=42)
    await client.add_reaction(9, known, "👍")  # the same route, another message
    assert rig.statuses() == [404, 204]


async def test_a_refused_token_stops_every_call_for_a_minute(rig: Rig) -> None:
    client = rig.client(token="wrong-secret-token-987")
    with pytest.raises(DiscordError) as caught:
        await client.get_me()
    assert caught.value.status == 401
    with pytest.raises(DiscordError) as caught:
        await client.send_message(5, "hi", nonce_key="ev-23")
    assert caught.value.status == 401
    assert rig.statuses() == [401]


async def test_refusals_are_shared_by_clients_through_one_store(rig: Rig) -> None:
    shared = LocalRefusals(rig.time.clock)
    rig.fake.missing_access.add(7)
    for _ in range(2):  # two workers, say
        with pytest.raises(DiscordMissingAccess):
            await rig.client(refusals=shared).send_message(7, "hi", nonce_key="ev-24")
    assert rig.statuses() == [403]


async def test_wrong_token_is_an_error_that_never_shows_the_token(rig: Rig) -> None:
    wrong = "wrong-secret-token-987"
    with pytest.raises(DiscordError) as caught:
        await rig.client(token=wrong).get_me()
    assert caught.value.status == 401
    assert "401" in str(caught.value)
    for text in (str(caught.value), repr(caught.value)):
        assert wrong not in text and TOKEN not in text


async def test_fake_rejects_content_over_2000_characters(rig: Rig) -> None:
    response = await rig.http.post(
        f"{rig.url}/channels/5/messages",
        json={"content": "x" * 2001},
        headers={"Authorization": f"Bot {TOKEN}"},
    )
    assert response.status_code == 400 and response.json()["code"] == 50035
    assert rig.fake.posted == []


# -- typing, fetching a message or a channel ---------------------------------------------------


async def test_typing_is_one_short_attempt_in_its_own_bucket(rig: Rig) -> None:
    client = rig.client()
    await client.trigger_typing(42)
    assert [(c.method, c.path, c.status) for c in rig.fake.calls] == [
        ("POST", "/channels/42/typing", 204)
    ]
    rig.fake.fail_next("POST /channels/42/typing", 502, count=3)
    with pytest.raises(DiscordUnavailable):
        await client.trigger_typing(42)
    assert len(rig.fake.typing_in(42)) == 2  # no retry after the 502
    assert rig.time.waits == []


async def test_a_message_is_fetched_as_discord_has_it_or_not_found(rig: Rig) -> None:
    client = rig.client()
    first = rig.fake.seed_message(7, "the question", author_id=55, username="bob")
    reply = rig.fake.seed_message(7, "the answer", author_id=56, reply_to=first, guild_id=9)
    fetched = await client.get_message(7, reply)
    assert fetched["content"] == "the answer" and fetched["author"]["id"] == "56"
    assert fetched["message_reference"] == {
        "message_id": str(first),
        "channel_id": "7",
        "guild_id": "9",
    }
    with pytest.raises(DiscordNotFound):
        await client.get_message(8, first)  # not in that channel
    rig.fake.missing_access.add(7)
    with pytest.raises(DiscordMissingAccess):
        await client.get_message(7, first)


async def test_a_thread_names_its_parent_and_an_unknown_channel_is_not_found(rig: Rig) -> None:
    client = rig.client()
    rig.fake.add_thread(77, parent_id=300, guild_id=500, name="plans")
    thread = await client.get_channel(77)
    assert (thread["type"], thread["parent_id"], thread["guild_id"]) == (11, "300", "500")
    assert (await client.get_channel(300))["type"] == 0  # a plain text channel
    rig.fake.unknown_channels.add(78)
    with pytest.raises(DiscordNotFound):
        await client.get_channel(78)


async def test_the_fake_can_hold_an_answer_back(rig: Rig) -> None:
    client = rig.client()
    rig.fake.delay_next("POST /channels/5/typing", 0.3)
    await client.trigger_typing(5)
    await client.trigger_typing(5)
    [slow, fast] = rig.fake.typing_in(5)
    assert fast.at - slow.at >= 0.3  # the second was sent only once the first was answered


async def test_a_lookup_inside_a_turn_tries_twice_at_most(rig: Rig) -> None:
    client = rig.client()
    rig.fake.fail_next("GET /channels/9", 502, count=5)
    with pytest.raises(DiscordUnavailable):
        await client.get_channel(9)
    with pytest.raises(DiscordUnavailable):
        await client.get_message(9, 1)
    assert [c.status for c in rig.fake.calls] == [502] * 4


# -- interactions ------------------------------------------------------------------------------


async def test_an_interaction_is_acknowledged_once_and_its_expiry_stops_no_other_call(
    rig: Rig,
) -> None:
    client, fake = rig.client(), rig.fake
    fake.interactions.commands[None] = [{"id": "1", "name": "memory", "options": []}]
    d = fake.interactions.use("/memory", user_id=7, channel_id=8)
    interaction_id, token = int(d["id"]), d["token"]
    deferral = {"type": 5, "data": {"flags": 64}}
    await client.respond(interaction_id, token, deferral)
    with pytest.raises(DiscordAlreadyAcknowledged):
        await client.respond(interaction_id, token, deferral)  # remembered: Discord not asked
    assert len([c for c in fake.calls if c.path.endswith("/callback")]) == 1
    to = InteractionWebhook(fake.bot_user_id, interaction_id, token)
    assert (await client.edit_original(to, "Paused."))["content"] == "Paused."

    fake.interactions.clock = lambda: time.monotonic() + 16 * 60  # the token's life is over
    with pytest.raises(DiscordInteractionGone) as gone:
        await client.follow_up(to, "more", number=1)
    assert token not in str(gone.value) and token not in repr(to)
    assert (await client.get_me())["id"] == str(fake.bot_user_id)  # the bot's token still works


async def test_a_follow_up_is_sent_at_most_once_across_workers_and_retried_jobs(
    rig: Rig, redis: Redis
) -> None:
    """Discord takes no nonce on an interaction's follow-up: one that Discord took but
    answered with a 500 is not sent again, neither by the same call nor by another worker (or
    the retried job) asking for the same follow-up; a 429, which Discord did not act on, is."""
    fake = rig.fake
    fake.interactions.commands[None] = [{"id": "1", "name": "memory", "options": []}]
    d = fake.interactions.use("/memory", user_id=7, channel_id=8)
    to = InteractionWebhook(fake.bot_user_id, int(d["id"]), d["token"])
    first, retried = (rig.client(refusals=RedisRefusals(redis)) for _ in range(2))
    await first.respond(to.interaction_id, to.token, {"type": 5, "data": {"flags": 64}})
    hook = f"POST /webhooks/{fake.bot_user_id}/"

    fake.fail_next(hook, 500, after=True)  # taken, but the answer is lost
    with pytest.raises(DiscordUnavailable):
        await first.follow_up(to, "part two", number=1)
    assert await retried.follow_up(to, "part two", number=1) is None
    fake.fail_next(hook, 429, retry_after=0.5)
    assert (await retried.follow_up(to, "part three", number=2)) is not None

    used = fake.interactions.find(d["id"])
    assert [m["content"] for m in used.followups] == ["part two", "part three"]
