"""Dead letters over the admin API (the real app, real Postgres and Redis): auth, shapes,
404/409, OpenAPI. The replay producing its reply is in test_inbox_retries.py."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest
from redis.asyncio import Redis
from sqlalchemy import text

from app.config import Settings
from app.db import SessionFactory
from app.main import create_app
from tests.support.frames import message_create
from tests.support.inbox import inbox_row, set_row
from tests.support.servers import serve
from tests.support.waiting import wait_until

SECRET = "test-admin-secret-8c2e4a6f1d3b5907"
ADMIN = {"Authorization": f"Bearer {SECRET}"}
TOKEN = {"x-discord-gateway-token": "test-gateway-token-3d9f1c7a5b2e8064"}
ARQ_QUEUE = "arq:queue"


@pytest.fixture
async def api(settings: Settings, sessions: SessionFactory, redis: Redis) -> AsyncIterator[str]:
    async with serve(create_app(settings)) as url:
        yield url


async def recorded(api: str, content: str) -> str:
    frame = message_create(content=content)
    async with httpx.AsyncClient(base_url=api) as client:
        response = await client.post("/webhook", json=frame, headers=TOKEN)
    assert response.json() == {"status": "ok"}
    event_id: str = frame["d"]["id"]
    return event_id


async def dead(sessions: SessionFactory, event_id: str, error: str = "DiscordUnavailable") -> None:
    await set_row(sessions, event_id, attempts=8, dead_at=text("now()"), last_error=error)


async def wait_enqueued(redis: Redis, event_id: str) -> None:
    async def queued() -> bool:
        return bool(await redis.exists(f"arq:job:event:{event_id}"))

    await wait_until(queued, within=5, what=f"event {event_id}'s job in the ARQ queue")


@pytest.mark.parametrize(
    ("method", "path"), [("GET", "/inbox/dead"), ("POST", "/inbox/123/replay")]
)
@pytest.mark.parametrize("headers", [{}, {"Authorization": "Bearer wrong"}], ids=["none", "wrong"])
async def test_dead_letters_need_the_admin_secret(
    api: str, sessions: SessionFactory, method: str, path: str, headers: dict[str, str]
) -> None:
    event_id = await recorded(api, "hello")
    await dead(sessions, event_id)
    async with httpx.AsyncClient(base_url=api) as client:
        response = await client.request(method, path.replace("123", event_id), headers=headers)
    assert response.status_code == 401
    assert (await inbox_row(sessions, event_id)).dead_at is not None  # no replay happened


async def test_dead_letters_are_listed_newest_first_without_message_text(
    api: str, sessions: SessionFactory
) -> None:
    older, newer = await recorded(api, "private words"), await recorded(api, "more words")
    pending = await recorded(api, "still pending")
    await dead(sessions, older, "DiscordUnavailable")
    await set_row(sessions, older, dead_at=text("now() - interval '1 hour'"))
    await dead(sessions, newer, "JobLost")
    async with httpx.AsyncClient(base_url=api, headers=ADMIN) as client:
        everything = (await client.get("/inbox/dead")).json()
        first = (await client.get("/inbox/dead", params={"limit": 1})).json()
        refused = await client.get("/inbox/dead", params={"limit": 0})
    assert [e["id"] for e in everything["events"]] == [newer, older]
    assert [e["lastError"] for e in everything["events"]] == ["JobLost", "DiscordUnavailable"]
    assert everything["total"] == 2 and pending not in str(everything)
    assert "words" not in str(everything)
    assert [e["id"] for e in first["events"]] == [newer] and first["total"] == 2
    assert refused.status_code == 422


async def test_replay_of_an_unknown_event_is_404(api: str) -> None:
    async with httpx.AsyncClient(base_url=api, headers=ADMIN) as client:
        response = await client.post("/inbox/no-such-event/replay")
    assert response.status_code == 404


async def test_replay_of_an_event_that_is_not_dead_is_409_and_changes_nothing(
    api: str, sessions: SessionFactory, redis: Redis
) -> None:
    pending = await recorded(api, "pending")
    handled = await recorded(api, "handled")
    await set_row(sessions, pending, attempts=3)
    await set_row(sessions, handled, handled_at=text("now()"))
    for event_id in (pending, handled):
        await wait_enqueued(redis, event_id)  # the webhook's own enqueue follows its answer
    queued_before = await redis.zcard(ARQ_QUEUE)
    async with httpx.AsyncClient(base_url=api, headers=ADMIN) as client:
        answers = [await client.post(f"/inbox/{eid}/replay") for eid in (pending, handled)]
    assert [a.status_code for a in answers] == [409, 409]
    assert answers[0].json()["eventId"] == pending
    assert (await inbox_row(sessions, pending)).attempts == 3
    assert await redis.zcard(ARQ_QUEUE) == queued_before


async def test_replay_resets_the_attempts_and_enqueues_the_event(
    api: str, sessions: SessionFactory, redis: Redis
) -> None:
    event_id = await recorded(api, "dead one")
    await dead(sessions, event_id)
    # The webhook's own job ran and failed long ago: ARQ has forgotten it.
    await wait_enqueued(redis, event_id)
    await redis.delete(ARQ_QUEUE, f"arq:job:event:{event_id}")
    async with httpx.AsyncClient(base_url=api, headers=ADMIN) as client:
        response = await client.post(f"/inbox/{event_id}/replay")
    assert response.status_code == 202
    assert response.json() == {"eventId": event_id, "queued": True}
    row = await inbox_row(sessions, event_id)
    assert (row.attempts, row.dead_at, row.handled_at) == (0, None, None)
    assert await redis.zscore(ARQ_QUEUE, f"event:{event_id}") is not None


async def test_openapi_documents_the_dead_letter_endpoints(api: str) -> None:
    async with httpx.AsyncClient(base_url=api) as client:
        document = (await client.get("/openapi.json")).json()
    listing = document["paths"]["/inbox/dead"]["get"]
    replay = document["paths"]["/inbox/{event_id}/replay"]["post"]
    for operation in (listing, replay):
        assert operation["security"] == [{"AdminBearer": []}]
    assert set(replay["responses"]) >= {"202", "401", "404", "409", "422", "503"}
    schemas = document["components"]["schemas"]
    assert set(schemas["DeadLetterBody"]["properties"]) == {
        "id",
        "type",
        "receivedAt",
        "deadAt",
        "attempts",
        "lastError",
    }
    assert set(schemas["DeadLettersBody"]["properties"]) == {"events", "total"}
    assert set(schemas["ReplayQueuedBody"]["properties"]) == {"eventId", "queued"}
