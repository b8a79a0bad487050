"""Everything a job needs, built once per process (worker start-up) and passed explicitly."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from app.chat.base import ChatModel
from app.config import Settings
from app.db import SessionFactory
from app.decision.base import Decider
from app.kit.queue import JobQueue

if TYPE_CHECKING:
    from app.agent import TaskAgent
    from app.discord.client import DiscordClient


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
