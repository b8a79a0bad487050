"""Fuzz the admin API from its own OpenAPI document with schemathesis, against the real app.

Properties: no 5xx (ADMIN_SECRET is set and Redis is up, so not even the documented 503),
every answer conforms to the documented status codes and schemas, a refused request (4xx)
changes nothing in Postgres, and without the right bearer secret every operation is 401."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import AsyncIterator, Coroutine
from dataclasses import dataclass, field
from datetime import date
from typing import Any

import pytest
import requests
import schemathesis
from hypothesis import given, settings
from hypothesis import strategies as st
from redis.asyncio import Redis
from requests.structures import CaseInsensitiveDict
from schemathesis import Case, CheckFunction, GenerationMode, Response
from schemathesis.checks import not_a_server_error
from schemathesis.core.result import Ok
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    negative_data_rejection,
    response_schema_conformance,
    status_code_conformance,
)
from sqlalchemy import text

from app.config import Settings
from app.db import SessionFactory, unit_of_work
from app.kit.clock import utcnow
from app.main import create_app
from app.memory import store
from app.memory.records import Why
from app.models.nightly import NightlyRun
from app.vocabulary import Actor
from tests.support.servers import serve

SECRET = "test-admin-secret-8c2e4a6f1d3b5907"
ADMIN_OPERATIONS = {
    "POST /memory/rollback",
    "POST /nightly/run",
    "GET /nightly/runs",
    "GET /nightly/runs/{run_id}",
    "GET /users/{user_id}/memories",
    "GET /users/{user_id}/memory-log",
    "GET /users/{user_id}/export",
    "GET /memories/{memory_id}",
    "POST /users/{user_id}/erase",
    "GET /erasures/{erasure_id}",
    "GET /inbox/dead",
    "POST /inbox/{event_id}/replay",
    "GET /channels/{channel_id}/settings",
    "PUT /channels/{channel_id}/settings",
    "GET /usage",
}
# What an admin request may change, fingerprinted row by row.
TABLES = [
    "nightly_runs",
    "memories",
    "memory_log",
    "style_overrides",
    "pins",
    "inbox",
    "channels",
    "erasures",
]
CHECKS: list[CheckFunction] = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_schema_conformance,
]
RIGHT = f"Bearer {SECRET}"
BEARERS: dict[str, str | None] = {
    "right": RIGHT,
    "missing": None,
    "wrong": "Bearer not-the-secret",
    "basic": f"Basic {SECRET}",
    "prefix": f"Bearer {SECRET[:-1]}",
}


@dataclass
class Harness:
    url: str
    settings: Settings
    sessions: SessionFactory
    loop: asyncio.AbstractEventLoop
    http: requests.Session = field(default_factory=requests.Session)
    tally: Counter[str] = field(default_factory=Counter)

    def run(self, coro: Coroutine[Any, Any, Any]) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout=60)

    async def fingerprint(self) -> dict[str, str | None]:
        async with self.sessions() as session:
            return {
                table: await session.scalar(
                    text(f"SELECT md5(string_agg(t::text, ',' ORDER BY t::text)) FROM {table} t")
                )
                for table in TABLES
            }


async def seed(sessions: SessionFactory) -> None:
    """A finished past run that added one memory: something a rollback could change."""
    async with unit_of_work(sessions) as session:
        run = NightlyRun(
            day=date(2026, 3, 1),
            status="finished",
            diary="静かな一日。",
            summary={"added": [], "updated": [], "deleted": [], "decayed": [], "errors": []},
            finished_at=utcnow(),
        )
        session.add(run)
        await session.flush()
        await store.add(
            session, 11, "likes tea", Why(Actor.NIGHTLY, "seed", run_id=run.id), learned_in=None
        )


@pytest.fixture
async def h(settings: Settings, sessions: SessionFactory, redis: Redis) -> AsyncIterator[Harness]:
    await seed(sessions)
    async with serve(create_app(settings)) as url:
        harness = Harness(url, settings, sessions, asyncio.get_running_loop())
        yield harness
        harness.http.close()


def admin_schema(settings: Settings) -> schemathesis.BaseSchema:
    document = create_app(settings).openapi()
    schema = schemathesis.openapi.from_dict(document).include(tag="admin")
    labels = set()
    for operation in schema.get_all_operations():
        assert isinstance(operation, Ok), operation  # the document parses, operation by operation
        labels.add(operation.ok().label)
    assert labels == ADMIN_OPERATIONS  # the document still names every admin operation
    return schema


def send(h: Harness, case: Case[Any], bearer: str) -> Response:
    headers = CaseInsensitiveDict(
        {k: v for k, v in (case.headers or {}).items() if k.lower() != "authorization"}
    )
    secret = BEARERS[bearer]
    if secret is not None:
        headers["Authorization"] = secret
    case.headers = headers
    response = case.call(base_url=h.url, session=h.http, timeout=30)
    h.tally[f"{case.operation.label} {bearer} {response.status_code}"] += 1
    return response


def check(h: Harness, case: Case[Any], bearer: str, *, negative: bool) -> None:
    before = h.run(h.fingerprint())
    response = send(h, case, bearer)
    if response.status_code >= 400:
        assert h.run(h.fingerprint()) == before, f"{response.status_code} changed the database"
    extra: list[CheckFunction] = [negative_data_rejection] if negative and bearer == "right" else []
    case.validate_response(response, checks=[*CHECKS, *extra])
    assert response.status_code < 500, (response.status_code, response.text[:300])
    if bearer != "right":
        assert response.status_code == 401, (response.status_code, response.text[:300])


BIGINT_MAX = 2**63 - 1


# Half the requests carry the right secret, so the operations themselves are exercised too.
bearers = st.sampled_from(["right"] * (len(BEARERS) - 1) + sorted(set(BEARERS) - {"right"}))


async def fuzz(h: Harness, mode: GenerationMode, examples: int) -> None:
    strategy = admin_schema(h.settings).as_strategy(generation_mode=mode)

    @settings(max_examples=examples, deadline=None)
    @given(case=strategy, bearer=bearers)
    def prop(case: Case[Any], bearer: str) -> None:
        check(h, case, bearer, negative=mode is GenerationMode.NEGATIVE)

    await asyncio.to_thread(prop)
    print(f"\nadmin answers ({mode.value}):")
    for label, count in sorted(h.tally.items()):
        print(f"  {label}: {count}")


async def test_schema_valid_requests_conform_and_only_the_secret_opens(h: Harness) -> None:
    await fuzz(h, GenerationMode.POSITIVE, examples=150)
    statuses = {label.rsplit(" ", 1)[1] for label in h.tally}
    assert "401" in statuses and statuses & {"200", "202"}


async def test_schema_invalid_requests_are_refused_and_change_nothing(h: Harness) -> None:
    await fuzz(h, GenerationMode.NEGATIVE, examples=150)
    assert any(label.endswith(" right 422") for label in h.tally)


async def test_unparseable_json_without_the_secret_is_401(h: Harness) -> None:
    # The OpenAPI document: every admin endpoint answers 401 when the bearer is missing or wrong.
    response = await asyncio.to_thread(
        h.http.post,
        f"{h.url}/memory/rollback",
        data=b"{",
        headers={"Content-Type": "application/json"},
        timeout=10,
    )
    assert response.status_code == 401, response.text[:300]


async def test_a_body_that_is_not_utf8_is_a_documented_422(h: Harness) -> None:
    response = await asyncio.to_thread(
        h.http.post,
        f"{h.url}/memory/rollback",
        data=b"\xff",
        headers={"Content-Type": "application/json", "Authorization": RIGHT},
        timeout=10,
    )
    assert response.status_code == 422, response.text[:300]


@pytest.mark.parametrize("dry_run", [False, True])
async def test_a_run_id_past_bigint_is_a_documented_4xx(h: Harness, dry_run: bool) -> None:
    before = await h.fingerprint()
    response = await asyncio.to_thread(
        h.http.post,
        f"{h.url}/memory/rollback",
        json={"runId": BIGINT_MAX + 1, "dryRun": dry_run},
        headers={"Authorization": RIGHT},
        timeout=10,
    )
    assert await h.fingerprint() == before
    assert response.status_code in {404, 422}, response.text[:300]
