"""Build the process-wide Services from settings, and close them again."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from datetime import date

import httpx

from app.agent import build_agent
from app.chat.providers import open_adapters
from app.config import SandboxBackend, Settings
from app.db import create_engine, create_session_factory
from app.decision.factory import open_decider
from app.directory.store import rules_cache
from app.discord.attachments import AllowedHosts
from app.discord.cdn import AttachmentFetcher
from app.discord.client import DiscordClient
from app.discord.refusals import RedisRefusals
from app.embeddings.client import build_embedder, check_dimensions
from app.kit.arqueue import create_queue, version_redis
from app.kit.queue import JobQueue
from app.kit.tls import httpx_tls
from app.kit.versioned import Unshared, VersionedCache
from app.services import GUILD_TOKENS_TTL_S, Services
from app.usage.budget import SpendGate
from app.usage.limiter import Limiter


@asynccontextmanager
async def open_services(
    settings: Settings, *, queue: JobQueue | None = None
) -> AsyncIterator[Services]:
    async with AsyncExitStack() as stack:
        engine = create_engine(
            settings.database_url, transaction_pooling=settings.database_transaction_pooling
        )
        stack.push_async_callback(engine.dispose)
        sessions = create_session_factory(engine)
        http = await stack.enter_async_context(httpx.AsyncClient(timeout=30.0, verify=httpx_tls()))
        if queue is None:
            arq_queue = create_queue(settings.redis_target)
            stack.push_async_callback(arq_queue.close)
            queue = arq_queue
        token = settings.discord_bot_token
        if token is None:
            raise RuntimeError("DISCORD_BOT_TOKEN is required by the worker")
        shared = version_redis(settings.redis_target)
        stack.push_async_callback(shared.aclose, close_connection_pool=True)
        discord = DiscordClient(
            http,
            token=token.get_secret_value(),
            api_base=settings.discord_api_base,
            refusals=RedisRefusals(shared),
        )
        embedder = build_embedder(settings, http)
        if embedder is not None:
            await check_dimensions(embedder, timeout_s=settings.embeddings_query_timeout_s)
        bot_id, bot_name = await _identity(settings, discord)
        guild_tokens: VersionedCache[tuple[date, int], int] = VersionedCache(
            Unshared(), ttl_s=GUILD_TOKENS_TTL_S
        )
        gate = SpendGate(
            sessions=sessions,
            per_user=settings.daily_tokens_per_user,
            per_guild=settings.daily_tokens_per_guild,
            guild_tokens=guild_tokens,
        )
        adapters = await stack.enter_async_context(open_adapters(settings, gate=gate))
        chat = adapters.chat
        decider = await stack.enter_async_context(open_decider(settings, adapters.decisions))
        agent = None
        if settings.jina_api_key is not None or settings.sandbox_backend != SandboxBackend.NONE:
            agent = build_agent(settings, chat=chat, http=http, sessions=sessions)
            stack.push_async_callback(agent.aclose)
        yield Services(
            settings=settings,
            sessions=sessions,
            discord=discord,
            decider=decider,
            chat=chat,
            queue=queue,
            bot_user_id=bot_id,
            bot_name=bot_name,
            agent=agent,
            attachments=AttachmentFetcher(
                http, AllowedHosts.parse(settings.discord_attachment_hosts)
            ),
            channel_rules=rules_cache(shared),
            embedder=embedder,
            limiter=Limiter(shared),
            guild_tokens=guild_tokens,
        )


async def _identity(settings: Settings, discord: DiscordClient) -> tuple[int, str]:
    """DISCORD_BOT_USER_ID when set; otherwise asked once from GET /users/@me."""
    if settings.discord_bot_user_id is not None:
        return settings.discord_bot_user_id, "bot"
    me = await discord.get_me()
    return int(me["id"]), str(me.get("global_name") or me.get("username") or "bot")
