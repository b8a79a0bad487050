"""Redis behind a real Sentinel (REDIS_SENTINELS): REDIS_URL's host points nowhere, so only
the sentinel can say where the master is. The core flow runs there, and when the master dies
and Sentinel promotes its replica, the API and a running worker follow it by themselves."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator

import httpx
import pytest
from redis.asyncio import Redis

from app.config import Settings
from app.db import SessionFactory
from app.worker import build_worker
from tests.conftest import REDIS_DB
from tests.support.core_flow import FACT, REPLY, run_core_flow
from tests.support.frames import message_create
from tests.support.proxies import MASTER, REDIS_SENTINEL, REDIS_SERVER, PrivateSentinel
from tests.support.servers import free_port
from tests.support.stack import BOT_ID, Stack, running_stack
from tests.support.waiting import wait_until

pytestmark = pytest.mark.skipif(
    REDIS_SENTINEL is None or REDIS_SERVER is None, reason="redis-sentinel is not installed"
)


@pytest.fixture
def sentinel() -> Iterator[PrivateSentinel]:
    watched = PrivateSentinel()
    watched.start()
    try:
        yield watched
    finally:
        watched.close()


@pytest.fixture
async def stack(
    settings: Settings,
    sessions: SessionFactory,
    sentinel: PrivateSentinel,
    monkeypatch: pytest.MonkeyPatch,
) -> AsyncIterator[Stack]:
    """The whole stack on Sentinel. Nothing listens at REDIS_URL's host: it gives only the
    database number (and the password)."""
    behind = settings.model_copy(
        update={
            "redis_url": f"redis://127.0.0.1:{free_port()}/{REDIS_DB}",
            "redis_sentinels": [sentinel.address],
            "redis_sentinel_master": MASTER,
        }
    )
    async with running_stack(behind, monkeypatch) as running:
        yield running


async def master_port(sentinel: PrivateSentinel) -> int:
    client = Redis(host="127.0.0.1", port=sentinel.port)
    try:
        # redis-py leaves execute_command (and every SENTINEL helper) unannotated.
        ask = ("SENTINEL", "get-master-addr-by-name", MASTER)
        _, port = await client.execute_command(*ask)  # type: ignore[no-untyped-call]
    finally:
        await client.aclose()
    return int(port)


async def test_the_core_flow_runs_on_the_master_sentinel_names(
    stack: Stack, sessions: SessionFactory
) -> None:
    flow = await run_core_flow(stack, sessions)
    assert flow.replies == [REPLY] and flow.reactions == 1
    assert flow.memories == [FACT]
    assert flow.night["status"] == "finished", flow.night


async def test_after_a_failover_the_api_and_a_running_worker_follow_the_new_master(
    stack: Stack, sentinel: PrivateSentinel
) -> None:
    worker = build_worker(stack.settings, cron_jobs=[])
    running = asyncio.create_task(worker.async_run())
    try:
        await stack.post(message_create(content=f"<@{BOT_ID}> before", channel_id=71))
        await wait_until(lambda: len(stack.replies()) == 1, within=20, what="a reply")

        sentinel.kill_master()
        await wait_until(
            lambda: _promoted(sentinel), within=30, what="Sentinel to promote the replica"
        )
        async with httpx.AsyncClient(base_url=stack.api) as client:

            async def ready() -> bool:
                return (await client.get("/readyz")).status_code == 200

            await wait_until(ready, within=20, what="the API to reach the new master")
        await stack.post(message_create(content=f"<@{BOT_ID}> after", channel_id=72))
        await wait_until(lambda: len(stack.replies()) == 2, within=30, what="a second reply")
    finally:
        worker.drain()
        await asyncio.gather(running, return_exceptions=True)
        await worker.close()
    assert [m["channel_id"] for m in stack.replies()] == ["71", "72"]


async def _promoted(sentinel: PrivateSentinel) -> bool:
    return await master_port(sentinel) == sentinel.replica_port
