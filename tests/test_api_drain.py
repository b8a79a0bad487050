"""`uvicorn app.main:app` on SIGTERM: /readyz fails at once while the API still serves (the
webhook included) for API_DRAIN_S, so load balancers stop sending before it closes; then it
exits. The in-flight gauge counts requests being served."""

from __future__ import annotations

import asyncio
import json
import sys
import time
from pathlib import Path

import httpx

from app.config import Settings
from app.db import SessionFactory
from tests.support.frames import message_create
from tests.support.servers import free_port
from tests.support.waiting import wait_until
from tests.test_startup_refusals import GOOD_TOKEN, environment

DRAIN_S = 3.0


async def test_on_sigterm_readiness_fails_first_and_the_api_closes_after_its_drain(
    settings: Settings, sessions: SessionFactory, tmp_path: Path
) -> None:
    port = free_port()
    env = environment(settings.database_url, API_DRAIN_S=str(DRAIN_S))
    env["REDIS_URL"] = settings.redis_url
    log = tmp_path / "api.log"
    with log.open("w") as out:
        api = await asyncio.create_subprocess_exec(
            *(sys.executable, "-m", "uvicorn", "app.main:app", "--port", str(port)),
            env=env,
            cwd=tmp_path,
            stdout=out,
            stderr=asyncio.subprocess.STDOUT,
        )
    try:
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=5) as client:

            async def ready() -> bool:
                try:
                    return (await client.get("/readyz")).status_code == 200
                except httpx.TransportError:
                    return False

            await wait_until(ready, within=60, what="the API to be ready")
            api.terminate()  # SIGTERM
            signalled = time.monotonic()

            async def not_ready() -> bool:
                return (await client.get("/readyz")).status_code == 503

            await wait_until(not_ready, within=DRAIN_S / 2, what="/readyz to fail")
            readiness = (await client.get("/readyz")).json()
            frame = message_create(content="still accepted while draining")
            webhook = await client.post(
                "/webhook",
                content=json.dumps(frame),
                headers={"x-discord-gateway-token": GOOD_TOKEN},
            )
            health = await client.get("/healthz")
            metrics = (await client.get("/metrics")).text
            answered_within_drain = time.monotonic() - signalled < DRAIN_S
        exit_code = await asyncio.wait_for(api.wait(), 30)
        closed_after_s = time.monotonic() - signalled
    finally:
        if api.returncode is None:
            api.kill()
            await api.wait()
    assert readiness == {"ready": False, "draining": True}
    assert webhook.status_code == 200 and webhook.json()["status"] == "ok"
    assert health.status_code == 200 and answered_within_drain
    assert "http_requests_in_flight 1.0" in metrics  # the /metrics request itself
    assert closed_after_s >= DRAIN_S, log.read_text()
    assert exit_code is not None
    assert '"API draining: /readyz fails from now"' in log.read_text()
