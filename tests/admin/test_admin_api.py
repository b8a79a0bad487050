"""The admin API through a real FastAPI app and HTTP (ASGI) on real Postgres: auth, shapes,
status codes, bad input, and the OpenAPI document."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import date, timedelta
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from sqlalchemy import select

from app.admin.endpoints import router
from app.admin.errors import install as install_admin_errors
from app.chat.fake import Text
from app.config import Settings
from app.db import SessionFactory, unit_of_work
from app.decision.vocabulary import Question
from app.kit.arqueue import create_queue
from app.kit.clock import jst_day, utcnow
from app.kit.queue import JobQueue
from app.memory import store
from app.memory.records import Why
from app.models.memory import Memory
from app.models.nightly import NightlyRun
from app.nightly.run import JOB_NAME, nightly_step, resume_nightly_runs
from app.vocabulary import Actor, SkipReason
from tests.support.memory_env import add_message, fact, memory_env
from tests.support.queue import InMemoryQueue
from tests.support.servers import free_port

SECRET = "test-admin-secret-8c2e4a6f1d3b5907"
AUTH = {"Authorization": f"Bearer {SECRET}"}
ALICE = 11
ENDPOINTS = [
    ("POST", "/memory/rollback"),
    ("POST", "/nightly/run"),
    ("GET", "/nightly/runs"),
    ("GET", "/nightly/runs/1"),
]


def admin_app(settings: Settings, sessions: SessionFactory, queue: JobQueue) -> FastAPI:
    """What app/main.py does for these routes: state set by the lifespan, router included."""
    app = FastAPI()
    app.state.settings = settings
    app.state.sessions = sessions
    app.state.queue = queue
    install_admin_errors(app)
    app.include_router(router)
    return app


@pytest.fixture
def queue() -> InMemoryQueue:
    return InMemoryQueue()


@pytest.fixture
async def client(
    settings: Settings, sessions: SessionFactory, queue: InMemoryQueue
) -> AsyncIterator[httpx.AsyncClient]:
    app = admin_app(settings, sessions, queue)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://admin") as http:
        yield http


async def finished_run(sessions: SessionFactory, day: date = date(2026, 3, 1)) -> int:
    async with unit_of_work(sessions) as session:
        run = NightlyRun(
            day=day,
            status="finished",
            diary="今日は静かな一日だった。",
            summary={"added": [], "updated": [], "deleted": [], "decayed": [], "errors": []},
            finished_at=utcnow(),
        )
        session.add(run)
        await session.flush()
        return run.id


async def nightly_add(sessions: SessionFactory, run_id: int, content: str) -> int:
    async with unit_of_work(sessions) as session:
        memory = await store.add(
            session, ALICE, content, Why(Actor.NIGHTLY, "test", run_id=run_id), learned_in=None
        )
        return memory.id


async def memory_ids(sessions: SessionFactory) -> list[int]:
    async with sessions() as session:
        return list((await session.scalars(select(Memory.id).order_by(Memory.id))).all())


async def rolled_back(sessions: SessionFactory, run_id: int) -> bool:
    async with sessions() as session:
        run = await session.get(NightlyRun, run_id)
    assert run is not None
    return run.rolled_back_at is not None


# --- auth --------------------------------------------------------------------------------


@pytest.mark.parametrize(("method", "path"), ENDPOINTS)
@pytest.mark.parametrize(
    "headers",
    [{}, {"Authorization": "Bearer wrong"}, {"Authorization": f"Basic {SECRET}"}],
    ids=["missing", "wrong", "not-bearer"],
)
async def test_missing_or_wrong_secret_is_401_and_changes_nothing(
    client: httpx.AsyncClient,
    sessions: SessionFactory,
    queue: InMemoryQueue,
    method: str,
    path: str,
    headers: dict[str, str],
) -> None:
    run = await finished_run(sessions)

    response = await client.request(method, path, headers=headers)

    assert response.status_code == 401
    assert response.headers["www-authenticate"] == "Bearer"
    assert SECRET not in response.text
    assert not await rolled_back(sessions, run)
    assert queue.jobs == []


@pytest.mark.parametrize(("method", "path"), ENDPOINTS)
async def test_admin_api_is_503_while_the_secret_is_unset(
    settings: Settings, sessions: SessionFactory, method: str, path: str
) -> None:
    app = admin_app(settings.model_copy(update={"admin_secret": None}), sessions, InMemoryQueue())
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://admin") as http:
        response = await http.request(method, path, headers={"Authorization": "Bearer "})

    assert response.status_code == 503


async def test_openapi_documents_schemas_and_the_bearer_scheme(client: httpx.AsyncClient) -> None:
    document = (await client.get("/openapi.json")).json()

    schemes = document["components"]["securitySchemes"]
    assert schemes["AdminBearer"] == {
        "type": "http",
        "scheme": "bearer",
        "description": "Authorization: Bearer ADMIN_SECRET",
    }
    for method, path in ENDPOINTS:
        path = path.replace("/1", "/{run_id}")
        operation = document["paths"][path][method.lower()]
        assert operation["security"] == [{"AdminBearer": []}]
        assert "401" in operation["responses"]
    rollback = document["paths"]["/memory/rollback"]["post"]
    assert set(rollback["responses"]) >= {"200", "401", "404", "409", "422", "503"}
    schemas = document["components"]["schemas"]
    assert set(schemas["RollbackRequest"]["properties"]) == {"runId", "dryRun"}
    assert set(schemas["RollbackReport"]["properties"]) == {
        "runId",
        "dryRun",
        "deleted",
        "restored",
        "reinserted",
        "skipped",
    }
    assert set(schemas["AlreadyRolledBackBody"]["properties"]) == {"alreadyRolledBack", "runId"}
    assert set(schemas["AlreadyRanBody"]["properties"]) == {"alreadyRan", "runId"}


# --- rollback ----------------------------------------------------------------------------


async def test_rollback_without_a_body_undoes_the_latest_run(
    client: httpx.AsyncClient, sessions: SessionFactory
) -> None:
    older = await finished_run(sessions, date(2026, 3, 1))
    latest = await finished_run(sessions, date(2026, 3, 2))
    kept = await nightly_add(sessions, older, "Alice likes tea.")
    added = await nightly_add(sessions, latest, "Alice moved to Osaka.")

    response = await client.post("/memory/rollback", headers=AUTH)

    assert response.status_code == 200
    assert response.json() == {
        "runId": latest,
        "dryRun": False,
        "deleted": [added],
        "restored": [],
        "reinserted": [],
        "skipped": [],
    }
    assert await memory_ids(sessions) == [kept]
    assert await rolled_back(sessions, latest) and not await rolled_back(sessions, older)


async def test_an_empty_object_also_means_the_latest_run(
    client: httpx.AsyncClient, sessions: SessionFactory
) -> None:
    latest = await finished_run(sessions)

    response = await client.post("/memory/rollback", headers=AUTH, json={})

    assert response.status_code == 200 and response.json()["runId"] == latest


async def test_rollback_of_a_named_run_reports_skips(
    client: httpx.AsyncClient, sessions: SessionFactory
) -> None:
    run = await finished_run(sessions)
    added = await nightly_add(sessions, run, "Alice moved to Osaka.")
    async with unit_of_work(sessions) as session:  # `!memory forget` after the run
        why = Why(Actor.COMMAND, "!memory forget")
        assert await store.delete_one(session, added, why, owner=ALICE) is not None

    response = await client.post("/memory/rollback", headers=AUTH, json={"runId": run})

    assert response.status_code == 200
    assert response.json()["skipped"] == [
        {"memoryId": added, "action": "add", "reason": SkipReason.FORGOTTEN_BY_OWNER}
    ]
    assert await memory_ids(sessions) == []


async def test_a_dry_run_reports_and_changes_nothing(
    client: httpx.AsyncClient, sessions: SessionFactory
) -> None:
    run = await finished_run(sessions)
    added = await nightly_add(sessions, run, "Alice moved to Osaka.")

    response = await client.post(
        "/memory/rollback", headers=AUTH, json={"runId": run, "dryRun": True}
    )

    assert response.status_code == 200
    assert response.json()["dryRun"] is True
    assert response.json()["deleted"] == [added]
    assert await memory_ids(sessions) == [added]
    assert not await rolled_back(sessions, run)


async def test_a_repeat_is_409_dry_run_included(
    client: httpx.AsyncClient, sessions: SessionFactory
) -> None:
    run = await finished_run(sessions)
    first = await client.post("/memory/rollback", headers=AUTH, json={"runId": run})
    assert first.status_code == 200

    for body in ({"runId": run}, {"runId": run, "dryRun": True}, None):
        again = await client.post("/memory/rollback", headers=AUTH, json=body)
        assert again.status_code == 409
        assert again.json() == {"alreadyRolledBack": True, "runId": run}


async def test_unknown_runs_are_404(client: httpx.AsyncClient, sessions: SessionFactory) -> None:
    assert (await client.post("/memory/rollback", headers=AUTH)).status_code == 404
    await finished_run(sessions)
    missing = await client.post("/memory/rollback", headers=AUTH, json={"runId": 999})
    assert missing.status_code == 404
    assert (await client.get("/nightly/runs/999", headers=AUTH)).status_code == 404


@pytest.mark.parametrize(
    "content",
    [
        b'{"runId": "1"}',
        b'{"runId": -1}',
        b'{"runId": 0}',
        b'{"runId": 1.5}',
        b'{"runId": true}',
        b'{"runId": 1, "dryRun": "yes"}',
        b'{"runid": 1}',
        b"[1]",
        b"not json",
    ],
)
async def test_bad_rollback_input_is_422_and_changes_nothing(
    client: httpx.AsyncClient, sessions: SessionFactory, content: bytes
) -> None:
    run = await finished_run(sessions)
    added = await nightly_add(sessions, run, "Alice moved to Osaka.")

    response = await client.post(
        "/memory/rollback",
        headers={**AUTH, "Content-Type": "application/json"},
        content=content,
    )

    assert response.status_code == 422
    assert await memory_ids(sessions) == [added]
    assert not await rolled_back(sessions, run)


@pytest.mark.parametrize("run_id", ["-1", "0", "abc", "99999999999999999999"])
async def test_bad_run_ids_in_the_path_are_422(client: httpx.AsyncClient, run_id: str) -> None:
    assert (await client.get(f"/nightly/runs/{run_id}", headers=AUTH)).status_code == 422


# --- nightly runs ------------------------------------------------------------------------


async def test_nightly_run_starts_once_per_day(
    client: httpx.AsyncClient, queue: InMemoryQueue
) -> None:
    first = await client.post("/nightly/run", headers=AUTH)

    assert first.status_code == 202
    body = first.json()
    assert body == {"runId": body["runId"], "day": jst_day(utcnow()).isoformat()}
    assert queue.calls() == [(JOB_NAME, (body["runId"], "plan"))]

    second = await client.post("/nightly/run", headers=AUTH)
    assert second.status_code == 409
    assert second.json() == {"alreadyRan": True, "runId": body["runId"]}
    assert len(queue.jobs) == 1


async def test_runs_are_listed_newest_first_with_their_summaries(
    client: httpx.AsyncClient, sessions: SessionFactory
) -> None:
    older = await finished_run(sessions, date(2026, 3, 1))
    latest = await finished_run(sessions, date(2026, 3, 2))
    added = await nightly_add(sessions, latest, "Alice moved to Osaka.")
    async with unit_of_work(sessions) as session:
        run = await session.get(NightlyRun, latest)
        assert run is not None
        run.summary = {**run.summary, "added": [added], "decision_calls": 3, "model_calls": 2}

    listing = await client.get("/nightly/runs", headers=AUTH)
    one = await client.get(f"/nightly/runs/{latest}", headers=AUTH)

    assert listing.status_code == 200
    assert [run["runId"] for run in listing.json()] == [latest, older]
    assert one.status_code == 200
    body: dict[str, Any] = one.json()
    assert body == listing.json()[0]
    assert body["day"] == "2026-03-02"
    assert body["status"] == "finished"
    assert body["diary"] == "今日は静かな一日だった。"
    assert body["summary"] == {
        "added": [added],
        "updated": [],
        "deleted": [],
        "decayed": [],
        "expired": [],
        "errors": [],
        "decisionCalls": 3,
        "modelCalls": 2,
        "inputTokens": 0,
        "outputTokens": 0,
    }
    assert body["rolledBackAt"] is None


async def test_a_night_started_over_the_api_is_listed_and_rolled_back(
    settings: Settings, sessions: SessionFactory
) -> None:
    async with memory_env(settings, sessions) as env:
        env.jev.answers[Question.WORTH_KEEPING] = 0.9
        env.model.responder = lambda body: Text(fact("Alice moved to Osaka."))
        await add_message(
            sessions,
            id=1,
            channel_id=5,
            author_id=ALICE,
            author_name="Alice",
            content="I moved to Osaka last week",
            at=utcnow() - timedelta(hours=2),
        )
        app = admin_app(settings, sessions, env.queue)
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://admin") as http:
            started = (await http.post("/nightly/run", headers=AUTH)).json()
            while (taken := env.queue.take()) is not None:  # the worker's part
                run_id, step = taken.args
                assert isinstance(run_id, int) and isinstance(step, str)
                await nightly_step(env.services, run_id, step)
            run = (await http.get(f"/nightly/runs/{started['runId']}", headers=AUTH)).json()
            undo = await http.post("/memory/rollback", headers=AUTH)

    assert run["status"] == "finished"
    added = run["summary"]["added"]
    assert len(added) == 1 and run["diary"]
    assert undo.status_code == 200
    assert undo.json()["runId"] == started["runId"]
    assert undo.json()["deleted"] == added
    assert await memory_ids(sessions) == []


async def test_nightly_run_with_redis_down_is_503_and_the_sweeper_resumes_it(
    settings: Settings, sessions: SessionFactory
) -> None:
    down = create_queue(f"redis://127.0.0.1:{free_port()}/0")
    app = admin_app(settings, sessions, down)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://admin") as http:
        response = await http.post("/nightly/run", headers=AUTH)
        retry = await http.post("/nightly/run", headers=AUTH)
    await down.close()

    assert response.status_code == 503
    run_id = response.json()["runId"]
    assert retry.status_code == 409 and retry.json()["runId"] == run_id
    later = InMemoryQueue()
    assert await resume_nightly_runs(sessions, later, now=utcnow() + timedelta(minutes=5)) == [
        run_id
    ]
    assert later.calls() == [(JOB_NAME, (run_id, "plan"))]


async def test_each_route_lists_the_errors_it_answers_with_their_bodies(
    client: httpx.AsyncClient,
) -> None:
    document = (await client.get("/openapi.json")).json()
    rollback = document["paths"]["/memory/rollback"]["post"]["responses"]
    refs = {
        code: body["content"]["application/json"]["schema"]["$ref"].rsplit("/", 1)[-1]
        for code, body in rollback.items()
        if code in ("404", "409", "410")
    }
    assert refs == {
        "404": "ErrorBody",
        "409": "AlreadyRolledBackBody",
        "410": "ContentRedactedBody",
    }
    nightly = document["paths"]["/nightly/run"]["post"]["responses"]
    assert {"409", "503"} <= set(nightly)


async def test_a_repeated_query_parameter_is_refused(client: httpx.AsyncClient) -> None:
    # What the schema fuzzer found: `?before=Ê&before=5` was read as 5 and answered 200.
    once = await client.get("/nightly/runs?before=5", headers=AUTH)
    twice = await client.get("/nightly/runs?before=%C3%8A&before=5", headers=AUTH)
    assert once.status_code == 200
    assert twice.status_code == 422
    assert twice.json()["detail"][0]["loc"] == ["query", "before"]
