"""The gate before any decision or model call: the person's rate limit
(TURNS_PER_USER_PER_MINUTE, counted in Redis across workers; the commands' own limit is
app/commands/limits.py)
and the day's token budgets (DAILY_TOKENS_PER_USER, DAILY_TOKENS_PER_GUILD, read from the
usage rows). Past one, nothing is asked of any model, the person hears one short notice per
window at most, and the event is done: it is not retried."""

from __future__ import annotations

import logging
from enum import StrEnum

from app.discord.errors import DiscordError
from app.frames.events import MessageCreate
from app.kit.clock import jst_day, utcnow
from app.services import Services
from app.usage.budget import Budget, over_budget
from app.usage.limiter import WINDOW_S, Limit

log = logging.getLogger(__name__)

TURNS_LIMITED = (
    "You're sending me messages faster than I can answer them. Give me a minute, then try again!"
)
OVER_BUDGET = {
    Budget.PERSON: (
        "I've talked a lot with you today and reached my daily limit. I'll be back for you "
        "after midnight, Japan time!"
    ),
    Budget.GUILD: (
        "I've reached my daily limit for this server. I'll be back after midnight, Japan time!"
    ),
}
# A budget lasts the day: one reminder an hour is enough for someone who keeps asking.
BUDGET_NOTICE_EVERY_S = 3600.0


class Refused(StrEnum):
    """Why a turn or command was not run (the turn's outcome)."""

    RATE_LIMITED = "rate_limited"
    COMMAND_LIMITED = "command_limited"
    OVER_BUDGET = "over_budget"


async def refuse_turn(
    services: Services, message: MessageCreate, event_id: str, *, addressed: bool
) -> Refused | None:
    """None when this message may cost a model call; otherwise why not. Only an addressed
    message is answered with the notice (a bare reply to the bot gets none)."""
    settings = services.settings
    per_minute = settings.turns_per_user_per_minute
    if not await _within(services, Limit.TURNS, message.author.id, event_id, per_minute):
        if addressed:
            await _notify(services, message, event_id, Limit.TURNS, TURNS_LIMITED, WINDOW_S)
        return Refused.RATE_LIMITED
    async with services.sessions() as session:
        budget = await over_budget(
            session,
            jst_day(utcnow()),
            user_id=message.author.id,
            guild_id=message.guild_id,
            per_user=settings.daily_tokens_per_user,
            per_guild=settings.daily_tokens_per_guild,
            guild_tokens=services.guild_tokens,
        )
    if budget is None:
        return None
    log.info("turn refused: daily token budget used up", extra={"budget": budget.value})
    if addressed:
        kind, text = f"budget-{budget.value}", OVER_BUDGET[budget]
        await _notify(services, message, event_id, kind, text, BUDGET_NOTICE_EVERY_S)
    return Refused.OVER_BUDGET


async def _within(
    services: Services, limit: Limit, user_id: int, event_id: str, per_minute: int
) -> bool:
    if services.limiter is None:
        return True
    admitted = await services.limiter.admit(limit, user_id, event_id, per_minute)
    if not admitted:
        log.info("refused: rate limit", extra={"limit": limit.value, "per_minute": per_minute})
    return admitted


async def _notify(
    services: Services,
    message: MessageCreate,
    event_id: str,
    kind: str,
    text: str,
    every_s: float,
) -> None:
    """One notice per person and kind per ``every_s``, as a reply; a failed post is logged
    (the event stays done: a notice is not worth a retry)."""
    limiter = services.limiter
    if limiter is None or not await limiter.notice_due(kind, message.author.id, event_id, every_s):
        return
    try:
        await services.discord.send_message(
            message.channel_id, text, nonce_key=f"limit:{event_id}", reply_to=message.id
        )
    except DiscordError as exc:
        log.info("limit notice not sent", extra={"kind": kind, "error": type(exc).__name__})
