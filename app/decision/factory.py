"""Choose the decider: the decision service over HTTP when JEV_URL is set, else in-process."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from app.chat.base import ChatProvider
from app.config import Settings
from app.decision.base import Decider
from app.decision.client import HttpDecider, decision_session
from app.decision.logged import LoggedDecider
from app.decision.model import ModelDecider


@asynccontextmanager
async def open_decider(settings: Settings, provider: ChatProvider) -> AsyncIterator[Decider]:
    """Both modes answer through LoggedDecider (logs, metrics, spend); the service's
    connections are closed when the decider is."""
    if not settings.jev_url:
        yield LoggedDecider(
            ModelDecider(provider, model=settings.jev_model, timeout_s=settings.jev_timeout_s)
        )
        return
    key = settings.jev_api_key.get_secret_value() if settings.jev_api_key else None
    timeout_s = settings.jev_timeout_s
    async with decision_session() as web:
        yield LoggedDecider(
            HttpDecider(web, base_url=settings.jev_url, api_key=key, timeout_s=timeout_s)
        )
