"""Everything a job needs, built once per process (worker start-up) and passed explicitly."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date
from typing import TYPE_CHECKING

from app.chat.base import ChatModel
from app.config import Settings
from app.db import SessionFactory
from app.decision.base import Decider
from app.embeddings.base import Embedder
from app.kit.queue import JobQueue
from app.kit.versioned import Unshared, VersionedCache

if TYPE_CHECKING:
    from app.agent import TaskAgent
    from app.directory.store import Rules
    from app.discord.cdn import AttachmentFetcher
    from app.discord.client import DiscordClient
    from app.usage.limiter import Limiter

# A replied-to message Discord would not give us (403/404) is not asked for again this long.
MISSING_MESSAGE_TTL_S = 600.0
# A guild's tokens of the day (DAILY_TOKENS_PER_GUILD) are summed again after this long.
GUILD_TOKENS_TTL_S = 30.0


@dataclass(frozen=True)
class Services:
    settings: Settings
    sessions: SessionFactory
    discord: DiscordClient
    decider: Decider
    chat: ChatModel
    queue: JobQueue
    bot_user_id: int
    bot_name: str = "bot"
    agent: TaskAgent | None = None
    # Attachments of addressed messages (None: they are only named to the model).
    attachments: AttachmentFetcher | None = None
    # Recall, search and the duplicate check by meaning (None: words alone).
    embedder: Embedder | None = None
    # Per-person rate limits shared by every worker (None: unlimited, as in a bare test).
    limiter: Limiter | None = None
    # Channel rules (mode, persona, a thread's parent) per process; uncached by default.
    channel_rules: VersionedCache[int, Rules] = field(default_factory=lambda: VersionedCache(None))
    # Replied-to messages Discord refused or lost, by id.
    missing_messages: VersionedCache[int, bool] = field(
        default_factory=lambda: VersionedCache(Unshared(), ttl_s=MISSING_MESSAGE_TTL_S)
    )
    # The day's tokens per (JST day, guild), per process.
    guild_tokens: VersionedCache[tuple[date, int], int] = field(
        default_factory=lambda: VersionedCache(Unshared(), ttl_s=GUILD_TOKENS_TTL_S)
    )
