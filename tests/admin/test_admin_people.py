"""The admin inspection and erasure API: behind the bearer secret, in OpenAPI, and every read
of a person's memories or ledger is itself a ledger read with actor `admin`."""

from __future__ import annotations

import httpx
import pytest
from sqlalchemy import select

from app.db import SessionFactory
from app.decision.vocabulary import Question
from app.models.memory import Memory, MemoryLog
from tests.support.trust_env import ALICE, BOB, GUILD_A, World
from tests.support.worker import drain

PATHS = [
    ("GET", f"/users/{ALICE}/memories"),
    ("GET", f"/users/{ALICE}/memory-log"),
    ("GET", f"/users/{ALICE}/export"),
    ("GET", "/memories/1"),
    ("POST", f"/users/{ALICE}/erase"),
]


async def admin_reads(sessions: SessionFactory) -> list[MemoryLog]:
    async with sessions() as session:
        query = select(MemoryLog).where(MemoryLog.actor == "admin").order_by(MemoryLog.id)
        return list(await session.scalars(query))


@pytest.mark.parametrize(("method", "path"), PATHS)
@pytest.mark.parametrize("auth", [{}, {"Authorization": "Bearer wrong-secret"}])
async def test_every_person_endpoint_needs_the_secret(
    world: World, sessions: SessionFactory, method: str, path: str, auth: dict[str, str]
) -> None:
    await world.tell(ALICE, "I keep bees on the roof")
    async with httpx.AsyncClient(base_url=world.stack.api, headers=auth) as api:
        response = await api.request(method, path)

    assert response.status_code == 401
    assert await admin_reads(sessions) == []
    async with sessions() as session:
        assert len(list(await session.scalars(select(Memory)))) == 1


async def test_memories_come_with_origin_and_sources_and_the_read_is_logged(
    world: World, sessions: SessionFactory
) -> None:
    told = await world.tell(ALICE, "I keep bees on the roof")

    response = await world.admin("GET", f"/users/{ALICE}/memories")

    assert response.status_code == 200
    [memory] = response.json()
    assert memory["origin"] == {"kind": "guild", "guildId": str(GUILD_A)}
    assert memory["sources"][0]["messageId"] == told["d"]["id"]
    [read] = await admin_reads(sessions)
    assert (read.action, read.user_id, read.after) == ("read", ALICE, [memory["id"]])

    one = await world.admin("GET", f"/memories/{memory['id']}")
    assert one.status_code == 200 and one.json()["content"] == memory["content"]
    assert (await world.admin("GET", "/memories/999999")).status_code == 404
    assert len(await admin_reads(sessions)) == 2


async def test_the_ledger_is_paged_by_id_newest_first_and_reading_it_is_logged(
    world: World, sessions: SessionFactory
) -> None:
    for n in range(3):
        await world.tell(ALICE, f"I keep bees on roof {n}")

    first = (await world.admin("GET", f"/users/{ALICE}/memory-log", params={"limit": 2})).json()
    rest = await world.admin(
        "GET", f"/users/{ALICE}/memory-log", params={"limit": 100, "before": first["nextBefore"]}
    )

    ids = [row["id"] for row in first["rows"]] + [row["id"] for row in rest.json()["rows"]]
    assert ids == sorted(ids, reverse=True) and len(ids) == len(set(ids))
    assert {row["action"] for row in first["rows"] + rest.json()["rows"]} >= {"add", "read"}
    assert len(await admin_reads(sessions)) == 1  # once per change of the profile, not per page


async def test_the_ledger_can_leave_out_the_consoles_own_reads(
    world: World, sessions: SessionFactory
) -> None:
    await world.tell(ALICE, "I keep bees on the roof")
    for _ in range(3):  # a console refreshing: each read is itself a ledger row
        await world.admin("GET", f"/users/{ALICE}/memories")
    everything = (await world.admin("GET", f"/users/{ALICE}/memory-log")).json()["rows"]
    shown = await world.admin(
        "GET", f"/users/{ALICE}/memory-log", params={"hideAdminReads": "true"}
    )
    rows = shown.json()["rows"]
    assert {row["actor"] for row in everything} >= {"admin", "extraction"}
    assert rows and "admin" not in {row["actor"] for row in rows}
    assert [r["id"] for r in rows] == [r["id"] for r in everything if r["actor"] != "admin"]


async def test_erase_is_the_forgetme_erasure_run_by_the_worker_with_its_receipt(
    world: World, sessions: SessionFactory
) -> None:
    await world.tell(ALICE, "I keep bees on the roof")
    await world.tell(BOB, "I collect stamps")

    response = await world.admin("POST", f"/users/{ALICE}/erase")

    assert response.status_code == 202
    started = response.json()
    assert started["status"] == "running" and started["erasureId"] >= 1
    again = await world.admin("POST", f"/users/{ALICE}/erase")  # joins, does not repeat
    assert again.status_code == 202 and again.json()["erasureId"] == started["erasureId"]
    async with sessions() as session:  # nothing heavy ran in the API: her rows are still here
        assert ALICE in set(await session.scalars(select(Memory.user_id)))
    await drain(world.stack.settings)  # the worker erases
    status = (await world.admin("GET", f"/erasures/{started['erasureId']}")).json()
    assert status["status"] == "done" and status["userId"] == str(ALICE)
    assert status["receipt"]["memories"] == 1 and status["receipt"]["messages"] >= 1
    assert status["finishedAt"] is not None
    assert (await world.admin("GET", "/erasures/999999")).status_code == 404
    assert world.stack.discord.dms_to(ALICE) == []  # an operator's erasure sends no DM
    async with sessions() as session:
        owners = list(await session.scalars(select(Memory.user_id)))
    assert owners == [BOB]
    await world.tell(ALICE, "I adopted a greyhound")  # she is left paused, like `!forgetme`
    assert not [b for b in world.stack.jev.asked(Question.WORTH_KEEPING) if "greyhound" in str(b)]


async def test_the_endpoints_are_in_the_openapi_document_with_the_bearer_scheme(
    world: World,
) -> None:
    async with httpx.AsyncClient(base_url=world.stack.api) as api:
        document = (await api.get("/openapi.json")).json()

    for method, path in [
        ("get", "/users/{user_id}/memories"),
        ("get", "/users/{user_id}/memory-log"),
        ("get", "/memories/{memory_id}"),
        ("post", "/users/{user_id}/erase"),
        ("get", "/erasures/{erasure_id}"),
    ]:
        operation = document["paths"][path][method]
        assert operation["security"] == [{"AdminBearer": []}]
        ok = "202" if method == "post" else "200"
        assert ok in operation["responses"] and "401" in operation["responses"]


async def test_a_refreshing_console_logs_its_read_once_per_change_of_the_profile(
    world: World, sessions: SessionFactory
) -> None:
    await world.tell(ALICE, "I keep bees on the roof")
    for _ in range(3):  # a console refreshing while nothing changes
        await world.admin("GET", f"/users/{ALICE}/memories")
        await world.admin("GET", f"/users/{ALICE}/memory-log", params={"hideAdminReads": "true"})
    assert [r.reason for r in await admin_reads(sessions)] == ["inspect", "inspect ledger"]

    await world.tell(ALICE, "I keep goats in the garden")  # a change: the next refresh is a read
    for _ in range(2):
        await world.admin("GET", f"/users/{ALICE}/memories")
    reads = await admin_reads(sessions)
    assert [r.reason for r in reads] == ["inspect", "inspect ledger", "inspect"]
    assert len(reads[-1].after or []) == 2
