"""POST /webhook against the real app, a real Postgres and a real Redis (its rules:
docs/operations.md)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from pydantic import SecretStr
from redis.asyncio import Redis
from sqlalchemy import func, select

from app.config import Settings
from app.db import SessionFactory
from app.inbound.store import sweep_inbox
from app.kit.arqueue import create_queue
from app.main import create_app
from app.models.inbox import InboxEvent
from app.models.messages import Message
from app.models.structured import Observation
from tests.support.frames import frame, message_create, reaction_add
from tests.support.servers import free_port, serve
from tests.support.stack import running_stack
from tests.support.waiting import wait_until
from tests.support.worker import drain

TOKEN = {"x-discord-gateway-token": "test-gateway-token-3d9f1c7a5b2e8064"}
ARQ_QUEUE = "arq:queue"


@pytest.fixture
async def api(settings: Settings, sessions: SessionFactory, redis: Redis) -> AsyncIterator[str]:
    async with serve(create_app(settings)) as url:
        yield url


async def post(url: str, body: Any, headers: dict[str, str] | None = None) -> httpx.Response:
    content = body if isinstance(body, bytes) else json.dumps(body).encode()
    async with httpx.AsyncClient(base_url=url) as client:
        return await client.post(
            "/webhook", content=content, headers=TOKEN if headers is None else headers
        )


async def inbox_count(sessions: SessionFactory) -> int:
    async with sessions() as session:
        return int(await session.scalar(select(func.count()).select_from(InboxEvent)) or 0)


async def test_missing_token_is_401_before_the_body_is_read(api: str) -> None:
    # Headers promise a body that never comes: only an answer given before reading it returns.
    host, port = api.removeprefix("http://").split(":")
    reader, writer = await asyncio.open_connection(host, int(port))
    writer.write(
        b"POST /webhook HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        b"Content-Length: 1000\r\n\r\n"
    )
    await writer.drain()
    status_line = await asyncio.wait_for(reader.readline(), timeout=5)
    writer.close()
    await writer.wait_closed()
    assert status_line.startswith(b"HTTP/1.1 401")


async def test_wrong_token_is_401_and_records_nothing(api: str, sessions: SessionFactory) -> None:
    response = await post(
        api, message_create(content="hi"), headers={"x-discord-gateway-token": "nope"}
    )
    assert response.status_code == 401
    assert await inbox_count(sessions) == 0


async def test_body_over_one_mib_is_413(api: str, sessions: SessionFactory) -> None:
    big = message_create(content="x" * (1024 * 1024))
    response = await post(api, big)
    assert response.status_code == 413
    assert await inbox_count(sessions) == 0


@pytest.mark.parametrize(
    ("body", "field"),
    [
        (b"{not json", "body"),
        (b"[1, 2]", "body"),
        (frame("MESSAGE_CREATE", {"channel_id": "1"}), "d.id"),
        ({"op": 0, "t": "MESSAGE_CREATE", "s": 1, "d": "text"}, "d"),
        (
            frame("MESSAGE_CREATE", {**message_create(content="x")["d"], "id": "abc"}),
            "d.id",
        ),
        (
            frame("MESSAGE_CREATE", {**message_create(content="x")["d"], "author": None}),
            "d.author",
        ),
        (
            frame("MESSAGE_CREATE", {**message_create(content="x")["d"], "timestamp": "soon"}),
            "d.timestamp",
        ),
        (
            frame("MESSAGE_REACTION_ADD", {"user_id": "1", "channel_id": "2", "message_id": "3"}),
            "d.emoji",
        ),
        (frame("MESSAGE_DELETE_BULK", {"ids": [], "channel_id": "2"}), "d.ids"),
        (frame("MESSAGE_DELETE", {"id": True, "channel_id": "2"}), "d.id"),
        (message_create(content="nul \u0000 byte"), "body"),
    ],
)
async def test_malformed_frames_are_422_naming_the_problem(
    api: str, sessions: SessionFactory, body: Any, field: str
) -> None:
    response = await post(api, body)
    assert response.status_code == 422
    problems = response.json()["problems"]
    assert any(p["field"].startswith(field) for p in problems), problems
    assert await inbox_count(sessions) == 0


async def test_unhandled_types_are_ignored(api: str, sessions: SessionFactory) -> None:
    for body in (frame("TYPING_START", {"channel_id": "1"}), {"op": 11}, {"t": None}):
        response = await post(api, body)
        assert response.json() == {"status": "ignored"}
    assert await inbox_count(sessions) == 0


async def test_first_delivery_is_recorded_then_enqueued(
    api: str, sessions: SessionFactory, redis: Redis
) -> None:
    body = message_create(content="hello")
    response = await post(api, body)
    assert response.status_code == 200
    assert response.json() == {"status": "ok"}
    async with sessions() as session:
        row = await session.get(InboxEvent, body["d"]["id"])
    assert row is not None and row.payload == body and row.handled_at is None
    # The enqueue follows the commit; wait for the job to show up in the ARQ queue.

    async def queued() -> bool:
        return bool(await redis.zcard(ARQ_QUEUE))

    await wait_until(queued, within=5, what="the event's job in the ARQ queue")
    assert await redis.exists(f"arq:job:event:{body['d']['id']}")


async def test_replay_is_duplicate(api: str, sessions: SessionFactory) -> None:
    body = reaction_add(message_id=77, user_id=5)
    assert (await post(api, body)).json() == {"status": "ok"}
    assert (await post(api, body)).json() == {"status": "duplicate"}
    assert await inbox_count(sessions) == 1


async def test_three_concurrent_deliveries_give_exactly_one_ok(
    api: str, sessions: SessionFactory
) -> None:
    body = message_create(content="once")
    responses = await asyncio.gather(*(post(api, body) for _ in range(3)))
    statuses = sorted(r.json()["status"] for r in responses)
    assert statuses == ["duplicate", "duplicate", "ok"]
    assert await inbox_count(sessions) == 1


async def test_postgres_down_is_503_and_the_retry_is_processed(
    api: str, settings: Settings, sessions: SessionFactory
) -> None:
    body = message_create(content="while the database is down")
    down = settings.model_copy(
        update={"database_url": f"postgresql+asyncpg://postgres@127.0.0.1:{free_port()}/x"}
    )
    async with serve(create_app(down)) as broken:
        response = await post(broken, body)
    assert response.status_code == 503
    assert await inbox_count(sessions) == 0
    assert (await post(api, body)).json() == {"status": "ok"}
    await drain(settings)
    async with sessions() as session:
        assert await session.get(Message, int(body["d"]["id"])) is not None


async def test_redis_down_still_acknowledges_and_the_sweeper_delivers(
    settings: Settings, sessions: SessionFactory, redis: Redis
) -> None:
    body = message_create(content="while redis is down")
    no_redis = settings.model_copy(update={"redis_url": f"redis://127.0.0.1:{free_port()}/0"})
    async with serve(create_app(no_redis)) as url:
        response = await post(url, body)
    assert response.json() == {"status": "ok"}
    assert await redis.zcard(ARQ_QUEUE) == 0

    queue = create_queue(settings.redis_url)
    try:
        assert await sweep_inbox(sessions, queue, grace_s=0) == 1
    finally:
        await queue.close()
    await drain(settings)
    async with sessions() as session:
        message = await session.get(Message, int(body["d"]["id"]))
        event = await session.get(InboxEvent, body["d"]["id"])
    assert message is not None and message.content == "while redis is down"
    assert event is not None and event.handled_at is not None


async def test_metrics_count_responses_by_status(api: str) -> None:
    await post(api, message_create(content="counted"), headers={})
    async with httpx.AsyncClient(base_url=api) as client:
        text = (await client.get("/metrics")).text
    assert 'webhook_responses_total{status="401"}' in text


async def test_health_and_readiness(api: str) -> None:
    async with httpx.AsyncClient(base_url=api) as client:
        assert (await client.get("/healthz")).json() == {"status": "ok"}
        ready = await client.get("/readyz")
    assert ready.status_code == 200
    assert ready.json() == {"ready": True, "postgres": "ok", "redis": "ok"}


# --- reactions de-duplicated by gateway session and sequence ------------------------------

SESSION = {"x-discord-gateway-session": "9b2e4f6a8c0d1e3f5a7b9c1d3e5f7a9b"}


async def test_a_reaction_added_removed_and_added_again_is_observed_twice(
    settings: Settings, sessions: SessionFactory, redis: Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    add = reaction_add(message_id=4242, user_id=2001, emoji="🎉")
    remove = {**frame("MESSAGE_REACTION_REMOVE", add["d"]), "s": add["s"] + 1}
    add_again = {**add, "s": add["s"] + 2}
    headers = {**TOKEN, **SESSION}
    async with running_stack(settings, monkeypatch) as stack:
        answers = [(await post(stack.api, b, headers)).json() for b in (add, remove, add_again)]
        # A RESUME replays a frame with its session and sequence: nothing new happens.
        replayed = (await post(stack.api, add_again, headers)).json()
        await drain(stack.settings)

    assert answers == [{"status": "ok"}] * 3
    assert replayed == {"status": "duplicate"}
    async with sessions() as session:
        kinds = (await session.scalars(select(Observation.kind))).all()
    assert sorted(kinds) == ["reaction_add", "reaction_add", "reaction_remove"]


async def test_without_the_session_header_a_re_add_reads_as_a_replay(
    api: str, sessions: SessionFactory
) -> None:
    add = reaction_add(message_id=4242, user_id=2001, emoji="🎉")
    assert (await post(api, add)).json() == {"status": "ok"}
    assert (await post(api, {**add, "s": add["s"] + 2})).json() == {"status": "duplicate"}
    assert await inbox_count(sessions) == 1


# --- gateway token rotation -----------------------------------------------------------------

NEW_TOKEN = "rotated-gateway-token-7e5c3a1f9d8b6402"


async def test_during_a_rotation_the_new_and_the_previous_token_are_accepted(
    settings: Settings, sessions: SessionFactory, redis: Redis
) -> None:
    rotating = settings.model_copy(
        update={
            "gateway_token": SecretStr(NEW_TOKEN),
            "gateway_token_previous": settings.gateway_token,
        }
    )
    third = "some-other-gateway-token-0f1e2d3c4b5a6978"
    async with serve(create_app(rotating)) as url:
        new = await post(url, message_create(content="new"), {"x-discord-gateway-token": NEW_TOKEN})
        old = await post(url, message_create(content="previous"), TOKEN)
        other = await post(
            url, message_create(content="neither"), {"x-discord-gateway-token": third}
        )
        missing = await post(url, message_create(content="none"), {})
    assert (new.status_code, old.status_code) == (200, 200)
    assert (other.status_code, missing.status_code) == (401, 401)
    assert await inbox_count(sessions) == 2


async def test_after_the_rotation_the_previous_token_is_refused(
    settings: Settings, sessions: SessionFactory, redis: Redis
) -> None:
    rotated = settings.model_copy(update={"gateway_token": SecretStr(NEW_TOKEN)})
    async with serve(create_app(rotated)) as url:
        old = await post(url, message_create(content="previous"), TOKEN)
    assert old.status_code == 401
    assert await inbox_count(sessions) == 0
