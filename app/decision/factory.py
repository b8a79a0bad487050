"""Choose the decider: the decision service over HTTP when JEV_URL is set, else in-process."""

from __future__ import annotations

import httpx

from app.chat.base import ChatProvider
from app.config import Settings
from app.decision.base import AnswerSource, Decider
from app.decision.client import HttpDecider
from app.decision.logged import LoggedDecider
from app.decision.model import ModelDecider


def build_decider(settings: Settings, http: httpx.AsyncClient, provider: ChatProvider) -> Decider:
    """Both modes answer through LoggedDecider (logs, metrics, spend)."""
    source: AnswerSource
    if settings.jev_url:
        key = settings.jev_api_key.get_secret_value() if settings.jev_api_key else None
        source = HttpDecider(
            http, base_url=settings.jev_url, api_key=key, timeout_s=settings.jev_timeout_s
        )
    else:
        source = ModelDecider(provider, model=settings.jev_model, timeout_s=settings.jev_timeout_s)
    return LoggedDecider(source)
