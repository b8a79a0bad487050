"""Memory tests' world: FakeJev, FakeAnthropic and FakeDiscord on real local ports, and the
real clients (HttpDecider behind the LoggedDecider, AnthropicChat, DiscordClient) over them,
bundled as Services."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import anthropic
import httpx
import openai
from sqlalchemy import select

from app.channel.exchange import Exchange, Line
from app.chat.anthropic import AnthropicChat, anthropic_client
from app.chat.base import ChatProvider
from app.chat.metered import MeteredChat, Models
from app.chat.openai import OpenAIChat, openai_client
from app.config import Provider, Settings
from app.db import SessionFactory
from app.decision.client import HttpDecider, decision_session
from app.decision.fake import FakeJev
from app.decision.logged import LoggedDecider
from app.discord.client import DiscordClient
from app.discord.fake import FakeDiscord
from app.kit.tls import httpx_tls
from app.models.memory import Memory, MemoryLog
from app.models.messages import Message
from app.services import Services
from tests.support.providers import FakeModel, fake_model, serve_model
from tests.support.queue import InMemoryQueue
from tests.support.servers import serve

BOT_ID = 1000


@dataclass
class MemoryEnv:
    services: Services
    jev: FakeJev
    model: FakeModel
    discord: FakeDiscord
    sessions: SessionFactory
    queue: InMemoryQueue


@asynccontextmanager
async def memory_env(settings: Settings, sessions: SessionFactory) -> AsyncIterator[MemoryEnv]:
    jev, discord = FakeJev(), FakeDiscord(bot_user_id=BOT_ID)
    model = fake_model(settings.chat_provider)
    async with (
        serve(jev.app) as jev_url,
        serve_model(model) as model_url,
        serve(discord.app) as discord_url,
        httpx.AsyncClient(verify=httpx_tls()) as http,
        decision_session() as web,
    ):
        sdk: anthropic.AsyncAnthropic | openai.AsyncOpenAI
        adapter: ChatProvider
        if settings.chat_provider is Provider.OPENAI:
            sdk = openai_client(None, timeout_s=10.0, max_retries=0, base_url=model_url)
            adapter = OpenAIChat(sdk, model="fake-model")
        else:
            sdk = anthropic_client(None, timeout_s=10.0, max_retries=0, base_url=model_url)
            adapter = AnthropicChat(sdk, model="fake-model")
        queue = InMemoryQueue()
        services = Services(
            settings=settings,
            sessions=sessions,
            discord=DiscordClient(http, token=discord.token, api_base=discord_url, max_attempts=1),
            decider=LoggedDecider(HttpDecider(web, base_url=jev_url, api_key=None, timeout_s=5.0)),
            chat=MeteredChat(
                adapter, models=Models(settings.chat_model, settings.background_model)
            ),
            queue=queue,
            bot_user_id=BOT_ID,
        )
        try:
            yield MemoryEnv(services, jev, model, discord, sessions, queue)
        finally:
            await sdk.close()


# -- writer replies -------------------------------------------------------------------------


def fact(text: str, subject: str = "speaker") -> str:
    return json.dumps({"subject": subject, "fact": text})


def writer_request_text(body: dict[str, Any]) -> str:
    """The one user turn the writer was sent."""
    return str(body["messages"][0]["content"])


# -- data helpers ---------------------------------------------------------------------------


def exchange(speaker_id: int, speaker_name: str, *said: str, bot_says: str = "Nice!") -> Exchange:
    lines = [Line(speaker_id, speaker_name, False, text) for text in said]
    lines.append(Line(BOT_ID, "companion", True, bot_says))
    return Exchange(speaker_id=speaker_id, speaker_name=speaker_name, lines=tuple(lines))


async def add_memory(
    sessions: SessionFactory, user_id: int, content: str, *, age_days: float = 0
) -> int:
    """Insert a memory directly (as an acceptance test may) and return its id."""
    moment = datetime.now(UTC) - timedelta(days=age_days)
    async with sessions() as session, session.begin():
        memory = Memory(user_id=user_id, content=content, created_at=moment, updated_at=moment)
        session.add(memory)
        await session.flush()
        return memory.id


async def add_message(
    sessions: SessionFactory,
    *,
    id: int,
    channel_id: int,
    author_id: int,
    author_name: str,
    content: str,
    at: datetime,
    is_bot: bool = False,
    deleted: bool = False,
    guild_id: int | None = 1,
) -> None:
    """Insert a message directly (as an acceptance test may)."""
    async with sessions() as session, session.begin():
        session.add(
            Message(
                id=id,
                channel_id=channel_id,
                guild_id=guild_id,
                author_id=author_id,
                author_name=author_name,
                is_bot=is_bot,
                content=content,
                created_at=at,
                deleted_at=at if deleted else None,
            )
        )


async def memories_of(sessions: SessionFactory, user_id: int) -> dict[int, str]:
    async with sessions() as session:
        rows = await session.scalars(select(Memory).where(Memory.user_id == user_id))
        return {m.id: m.content for m in rows}


async def all_memories(sessions: SessionFactory) -> list[Memory]:
    async with sessions() as session:
        return list((await session.scalars(select(Memory).order_by(Memory.id))).all())


async def ledger_rows(sessions: SessionFactory) -> list[MemoryLog]:
    async with sessions() as session:
        return list((await session.scalars(select(MemoryLog).order_by(MemoryLog.id))).all())


def snapshot(state: object) -> dict[str, Any]:
    """A change row's ``before`` or ``after``: the memory as it was (never None here)."""
    assert isinstance(state, dict), state
    return state


def read_ids(row: MemoryLog) -> list[int]:
    """The memory ids a read row says were read (its ``after``)."""
    assert row.action == "read" and isinstance(row.after, list), (row.id, row.action)
    return [int(i) for i in row.after]
