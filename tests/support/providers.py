"""Running a suite on both chat providers: ``pytestmark = BOTH_PROVIDERS`` parametrises the
``provider`` fixture (tests/conftest.py) for every test that reaches the settings, so the
stack and the memory world use Anthropic's fake or the OpenAI-compatible one."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import pytest

from app.chat.fake import FakeAnthropic
from app.chat.fake_openai import FakeOpenAI
from app.config import Provider
from tests.support.servers import serve

BOTH_PROVIDERS = pytest.mark.both_providers

FakeModel = FakeAnthropic | FakeOpenAI


def fake_model(provider: Provider) -> FakeModel:
    return FakeOpenAI() if provider is Provider.OPENAI else FakeAnthropic()


@asynccontextmanager
async def serve_model(model: FakeModel) -> AsyncIterator[str]:
    """The fake on a local port; the base URL its SDK takes (``/v1`` for OpenAI's)."""
    async with serve(model.app) as url:
        yield f"{url}/v1" if isinstance(model, FakeOpenAI) else url
