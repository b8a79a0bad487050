"""Choose the adapters from settings: CHAT_PROVIDER for every chat purpose, JEV_PROVIDER for
the in-process decider. The one place that knows which provider is in use."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass

import httpx2

from app.chat.base import ChatProvider
from app.chat.metered import BudgetGate, MeteredChat, Models
from app.config import Provider, Settings

# Each SDK is imported where its provider is chosen: a process loads only the one it speaks
# (importing anthropic takes ~1.9 s here, openai ~0.7 s, at every start of every process).


@dataclass(frozen=True)
class Adapters:
    chat: MeteredChat  # every chat purpose, metered and checked against budgets
    decisions: ChatProvider  # the in-process decider's model (JEV_MODEL); LoggedDecider meters


@asynccontextmanager
async def open_adapters(
    settings: Settings, *, gate: BudgetGate | None = None
) -> AsyncIterator[Adapters]:
    """The adapters over their SDK clients, closed on exit."""
    async with AsyncExitStack() as stack:
        chat = _adapter(stack, settings, settings.chat_provider, settings.chat_model, None)
        decisions = _adapter(
            stack, settings, settings.jev_provider, settings.jev_model, settings.jev_timeout_s
        )
        models = Models(chat=settings.chat_model, background=settings.background_model)
        yield Adapters(MeteredChat(chat, gate=gate, models=models), decisions)


def decision_adapter(
    provider: Provider,
    http: httpx2.AsyncClient | None,
    *,
    model: str,
    timeout_s: float,
    max_retries: int,
    openai_key: str | None = None,
    openai_base_url: str | None = None,
) -> ChatProvider:
    """The decision service's model (JEV_PROVIDER): its client lives as long as ``http``."""
    if provider is Provider.OPENAI:
        from app.chat.openai import OpenAIChat, openai_client

        client = openai_client(
            http,
            timeout_s=timeout_s,
            max_retries=max_retries,
            api_key=openai_key,
            base_url=openai_base_url,
        )
        return OpenAIChat(client, model=model, timeout_s=timeout_s)
    from app.chat.anthropic import AnthropicChat, anthropic_client

    sdk = anthropic_client(http, timeout_s=timeout_s, max_retries=max_retries)
    return AnthropicChat(sdk, model=model, timeout_s=timeout_s)


def _adapter(
    stack: AsyncExitStack,
    settings: Settings,
    provider: Provider,
    model: str,
    timeout_s: float | None,
) -> ChatProvider:
    if provider is Provider.OPENAI:
        from app.chat.openai import OpenAIChat, openai_client

        key = settings.openai_api_key
        client = openai_client(
            None,
            timeout_s=settings.chat_timeout_s,
            api_key=key.get_secret_value() if key else None,
            base_url=settings.openai_base_url,
        )
        stack.push_async_callback(client.close)
        return OpenAIChat(client, model=model, timeout_s=timeout_s)
    from app.chat.anthropic import AnthropicChat, build_anthropic

    sdk = build_anthropic(settings)
    stack.push_async_callback(sdk.close)
    return AnthropicChat(sdk, model=model, timeout_s=timeout_s)
