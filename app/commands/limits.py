"""COMMANDS_PER_USER_PER_MINUTE, for text and slash commands alike (counted in Redis across
workers), and the autocomplete's own pace (AUTOCOMPLETE_PER_USER_PER_MINUTE): a keystroke is
not a command, but it is a read."""

from __future__ import annotations

import logging

from app.commands.answer import Answer
from app.commands.invocation import Invocation
from app.discord.errors import DiscordError
from app.services import Services
from app.usage.limiter import WINDOW_S, Limit

log = logging.getLogger(__name__)

COMMANDS_LIMITED = "That's a lot of commands at once. Please wait a minute before the next one."


async def command_refused(services: Services, who: Invocation, answer: Answer) -> bool:
    """False when the command may run; past the limit True, with the notice once a minute,
    and to every refused slash command (an interaction left unanswered shows as failed)."""
    limiter = services.limiter
    per_minute = services.settings.commands_per_user_per_minute
    if limiter is None or await limiter.admit(
        Limit.COMMANDS, who.user_id, who.event_id, per_minute
    ):
        return False
    log.info("refused: rate limit", extra={"limit": Limit.COMMANDS.value, "per_minute": per_minute})
    due = await limiter.notice_due(Limit.COMMANDS, who.user_id, who.event_id, WINDOW_S)
    try:
        await (answer.say if due else answer.owed)(COMMANDS_LIMITED)
    except DiscordError as exc:
        log.info("limit notice not sent", extra={"kind": "commands", "error": type(exc).__name__})
    return True


async def autocomplete_allowed(services: Services, who: Invocation) -> bool:
    """Whether this keystroke may read the asker's memories (past the pace: no choices)."""
    limiter = services.limiter
    per_minute = services.settings.autocomplete_per_user_per_minute
    return limiter is None or await limiter.admit(
        Limit.AUTOCOMPLETE, who.user_id, who.event_id, per_minute
    )
