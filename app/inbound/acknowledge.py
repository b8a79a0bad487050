"""An interaction's deferral, sent at once. Discord's three seconds run from the moment the
person sends a slash command, so the deferral (an ephemeral "thinking…") is its own job,
enqueued by the webhook beside recording the event and sent without touching Postgres: a
slow database delays the answer, never loses the interaction. The answer itself comes from
the event's job (``app/commands/interactions.py``), which defers again only when this did
not. An interaction answers one callback: a second, from anywhere, is refused (by Discord,
or at once by the client's memory of the first) and counts as done."""

from __future__ import annotations

import logging
from enum import StrEnum
from typing import Any

from prometheus_client import Counter

from app.discord.client import EPHEMERAL, DiscordClient
from app.discord.errors import DiscordAlreadyAcknowledged, DiscordError, DiscordInteractionGone
from app.frames.events import Event, Interaction, InteractionType
from app.kit.queue import Job
from app.services import Services

log = logging.getLogger(__name__)

DEFERRED_CHANNEL_MESSAGE = 5
DEFERRAL: dict[str, Any] = {"type": DEFERRED_CHANNEL_MESSAGE, "data": {"flags": EPHEMERAL}}

DEFERRALS = Counter(
    "interaction_deferrals_total",
    "Slash commands' deferrals by outcome: sent, already (sent before), gone (too late), failed",
    ["outcome"],
)
UNANSWERED = Counter(
    "interactions_unanswered_total",
    "Interactions the bot could not answer, by why: late (Discord's three seconds, or the "
    "token's fifteen minutes, had passed), failed (Discord refused or failed the call)",
    ["reason"],
)


class Deferral(StrEnum):
    SENT = "sent"
    ALREADY = "already"  # this interaction was acknowledged before: fine, go on
    GONE = "gone"  # too late: nothing can reach the person any more
    FAILED = "failed"

    @property
    def answerable(self) -> bool:
        return self in (Deferral.SENT, Deferral.ALREADY)


async def defer(discord: DiscordClient, interaction_id: int, token: str) -> Deferral:
    """Acknowledge a slash command with an ephemeral "thinking…" (its one callback)."""
    try:
        await discord.respond(interaction_id, token, DEFERRAL)
        outcome = Deferral.SENT
    except DiscordAlreadyAcknowledged:
        outcome = Deferral.ALREADY
    except DiscordInteractionGone:
        outcome = Deferral.GONE
        log.warning("interaction not deferred: its three seconds had passed")
    except DiscordError as exc:
        outcome = Deferral.FAILED
        log.warning("interaction not deferred", extra={"error": type(exc).__name__})
    DEFERRALS.labels(outcome=outcome.value).inc()
    return outcome


async def acknowledge_interaction(services: Services, interaction_id: int, token: str) -> None:
    """The job: the deferral and nothing else. Never retried (a retry would be too late)."""
    await defer(services.discord, interaction_id, token)


ACKNOWLEDGE = Job("acknowledge_interaction", acknowledge_interaction)


def acknowledgement(event: Event) -> Interaction | None:
    """The slash command an event is, when it wants the deferral (an autocomplete cannot be
    deferred: its choices are its answer)."""
    data = event.data
    if isinstance(data, Interaction) and data.type is InteractionType.APPLICATION_COMMAND:
        return data
    return None


def job_id(interaction_id: int) -> str:
    return f"ack:{interaction_id}"
