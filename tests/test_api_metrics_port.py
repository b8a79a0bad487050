"""The API's metrics on a port of their own (API_METRICS_PORT), for a network policy that lets
Prometheus reach them and nothing else of the API; GET /metrics on the API's port stays."""

from __future__ import annotations

import httpx
import pytest

from app.config import Settings
from app.main import create_app
from tests.support.servers import free_port, serve


async def test_the_metrics_port_serves_the_same_figures_and_not_the_api(
    settings: Settings, redis: object
) -> None:
    port = free_port()
    app = create_app(settings.model_copy(update={"api_metrics_port": port}))
    async with serve(app) as api, httpx.AsyncClient() as client:
        await client.post(f"{api}/webhook", content=b"{}")  # 401: no gateway token
        on_api = await client.get(f"{api}/metrics")
        alone = await client.get(f"http://127.0.0.1:{port}/metrics")
        admin = await client.get(f"http://127.0.0.1:{port}/inbox/dead")
        webhook = await client.post(f"http://127.0.0.1:{port}/webhook", content=b"{}")
    assert on_api.status_code == alone.status_code == 200
    for exposition in (on_api.text, alone.text):
        assert 'webhook_responses_total{status="401"}' in exposition
    # Nothing of the API answers there: a read of any path is the exposition, and nothing
    # takes a POST.
    assert admin.status_code == 200 and admin.text.startswith("# HELP")
    assert webhook.status_code == 405
    async with httpx.AsyncClient() as client:  # the port closes with the app
        with pytest.raises(httpx.ConnectError):
            await client.get(f"http://127.0.0.1:{port}/metrics", timeout=1)
