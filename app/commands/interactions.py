"""The slash front end: one recorded INTERACTION_CREATE, answered. A slash command is deferred
(if the webhook's own deferral job has not done it), then runs as the same command its text
form parses into, under the same limit, with its answers in the ephemeral response. An
autocomplete offers the asker's own memory ids. What can no longer be answered (Discord's
three seconds, or the token's fifteen minutes, passed) is logged and counted, never run."""

from __future__ import annotations

import logging
from datetime import datetime, timedelta
from typing import Any

from prometheus_client import Counter

from app.commands import slash
from app.commands.answer import Ephemeral
from app.commands.dispatch import handle_command
from app.commands.invocation import Invocation
from app.commands.limits import autocomplete_allowed, command_refused
from app.db import unit_of_work
from app.discord.client import INTERACTION_TOKEN_S, InteractionWebhook
from app.discord.errors import DiscordAlreadyAcknowledged, DiscordError, DiscordInteractionGone
from app.frames.events import Interaction, InteractionType
from app.inbound.acknowledge import UNANSWERED, Deferral, defer
from app.kit.clock import utcnow
from app.kit.spend import paid_by
from app.memory import store
from app.memory.records import Why
from app.services import Services
from app.vocabulary import Actor

log = logging.getLogger(__name__)

AUTOCOMPLETE_RESULT = 8
# Autocomplete choices are wanted while the person types: one older than this (a retried or
# swept job) is past Discord's three seconds anyway, give or take the hosts' clocks.
AUTOCOMPLETE_WINDOW = timedelta(seconds=10)
TOKEN_LIFETIME = timedelta(seconds=INTERACTION_TOKEN_S)

AUTOCOMPLETES = Counter(
    "interaction_autocompletes_total",
    "Autocomplete answers by outcome: answered, limited (no choices: past the pace), late",
    ["outcome"],
)


async def answer_interaction(services: Services, interaction: Interaction, event_id: str) -> None:
    # Whatever the command spends (a search's query embedding) is its user's, in its guild,
    # as for the same command typed in a message.
    with paid_by(interaction.guild_id, interaction.author.id):
        if interaction.type is InteractionType.AUTOCOMPLETE:
            await autocomplete(services, interaction, event_id)
        else:
            await slash_command(services, interaction, event_id)


def too_old(interaction: Interaction, now: datetime, window: timedelta) -> bool:
    return now - interaction.created_at > window


async def slash_command(services: Services, interaction: Interaction, event_id: str) -> None:
    """Defer (once), then run the command and answer it ephemerally. A slash command whose
    token has expired, or that could not be deferred, is not run: nobody would hear of it."""
    if too_old(interaction, utcnow(), TOKEN_LIFETIME):
        UNANSWERED.labels(reason="late").inc()
        log.warning("slash command not run: its token expired before it could be")
        return
    deferral = await defer(services.discord, interaction.id, interaction.token)
    if not deferral.answerable:
        UNANSWERED.labels(reason="late" if deferral is Deferral.GONE else "failed").inc()
        log.warning("slash command not run: not deferred", extra={"deferral": deferral.value})
        return
    who = Invocation.of_interaction(interaction, event_id)
    to = InteractionWebhook(interaction.application_id, interaction.id, interaction.token)
    answer = Ephemeral(services.discord, to)
    if await command_refused(services, who, answer):
        return
    try:
        await handle_command(services, slash.slash_command(interaction.data), who, answer)
    except DiscordInteractionGone:
        UNANSWERED.labels(reason="late").inc()
        log.warning("slash command's answer not delivered: its token expired")


async def autocomplete(services: Services, interaction: Interaction, event_id: str) -> None:
    """The asker's own memories as choices for a memory id (nothing for other options); a
    read counted per keystroke, not a ledger row each."""
    if too_old(interaction, utcnow(), AUTOCOMPLETE_WINDOW):
        AUTOCOMPLETES.labels(outcome="late").inc()
        return
    who = Invocation.of_interaction(interaction, event_id)
    used = slash.used(interaction.data)
    choices: list[dict[str, Any]] = []
    outcome = "answered"
    if slash.wants_memory_ids(used):
        if await autocomplete_allowed(services, who):
            async with unit_of_work(services.sessions) as session:
                why = Why(Actor.COMMAND, "autocomplete")
                found = await store.suggestions(session, who.user_id, why, slash.typed(used))
            choices = slash.memory_choices(found, used)
        else:
            outcome = "limited"
    response = {"type": AUTOCOMPLETE_RESULT, "data": {"choices": choices}}
    try:
        await services.discord.respond(interaction.id, interaction.token, response)
    except DiscordAlreadyAcknowledged:
        return
    except DiscordError as exc:
        outcome = "late" if isinstance(exc, DiscordInteractionGone) else "failed"
        log.info("autocomplete not answered", extra={"error": type(exc).__name__})
    AUTOCOMPLETES.labels(outcome=outcome).inc()
