"""The whole bot on this machine: our API and real worker, with local fakes of Discord, the
decision service and Anthropic on real ports. Tests post gateway frames and drain the worker."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
from pydantic import SecretStr

from app.agent.fake_jina import FakeJina
from app.chat.fake import Text
from app.config import Provider, Settings
from app.decision.fake import FakeJev
from app.discord.fake import FakeCDN, FakeDiscord
from app.kit.tls import httpx_tls
from app.main import create_app
from tests.support.providers import FakeModel, fake_model, serve_model
from tests.support.servers import serve
from tests.support.worker import drain

BOT_ID = 1000
TOKEN = {"x-discord-gateway-token": "test-gateway-token-3d9f1c7a5b2e8064"}
JEV_KEY = "test-jev-key-6b1d8f3a0c5e7294"


@dataclass
class Stack:
    settings: Settings
    api: str
    discord: FakeDiscord
    jev: FakeJev
    model: FakeModel  # FakeAnthropic, or FakeOpenAI with CHAT_PROVIDER=openai
    cdn: FakeCDN

    async def post(self, frame: dict[str, Any]) -> dict[str, Any]:
        async with httpx.AsyncClient(base_url=self.api, verify=httpx_tls()) as client:
            response = await client.post("/webhook", content=json.dumps(frame), headers=TOKEN)
        assert response.status_code == 200, response.text
        body: dict[str, Any] = response.json()
        return body

    async def deliver(self, *frames: dict[str, Any]) -> None:
        """Post each frame, then let the real worker process everything queued."""
        for frame in frames:
            await self.post(frame)
        await drain(self.settings)

    def replies(self) -> list[dict[str, Any]]:
        return list(self.discord.posted)


@asynccontextmanager
async def task_agent_settings() -> AsyncIterator[dict[str, Any]]:
    """A fake Jina on a real port, and the setting overrides that give the worker a task agent
    whose web tools reach it."""
    jina = FakeJina()
    async with serve(jina.app) as url:
        yield {
            "jina_api_key": SecretStr(jina.api_key),
            "jina_search_url": f"{url}/search",
            "jina_reader_url": f"{url}/reader",
        }


@asynccontextmanager
async def running_stack(
    settings: Settings,
    monkeypatch: pytest.MonkeyPatch,
    *,
    discord: FakeDiscord | None = None,
    discord_app: Any = None,
    **overrides: Any,
) -> AsyncIterator[Stack]:
    """``discord_app`` serves in place of ``discord.app`` (e.g. a wrapper that holds answers)."""
    jev, model, cdn = FakeJev(api_key=JEV_KEY), fake_model(settings.chat_provider), FakeCDN()
    discord = discord or FakeDiscord(bot_user_id=BOT_ID)
    model.default = Text("Hello from the model!")
    async with (
        serve(jev.app) as jev_url,
        serve_model(model) as model_url,
        serve(discord_app or discord.app) as discord_url,
        serve(cdn.app) as cdn_url,
    ):
        cdn.base_url = cdn_url
        if settings.chat_provider is Provider.OPENAI:
            monkeypatch.setenv("OPENAI_BASE_URL", model_url)
            monkeypatch.setenv("OPENAI_API_KEY", "test-openai-key")
        else:
            monkeypatch.setenv("ANTHROPIC_BASE_URL", model_url)
            monkeypatch.setenv("ANTHROPIC_API_KEY", "test-anthropic-key")
        configured = settings.model_copy(
            update={
                "discord_api_base": discord_url,
                "discord_bot_token": SecretStr(discord.token),
                "discord_bot_user_id": BOT_ID,
                "jev_url": jev_url,
                "jev_api_key": SecretStr(JEV_KEY),
                "discord_attachment_hosts": [cdn_url.removeprefix("http://")],
                **overrides,
            }
        )
        async with serve(create_app(configured)) as api:
            yield Stack(configured, api, discord, jev, model, cdn)
