"""A text command as the turn gives it to the command core: who asked where (the message's
id as trigger and event), and its channel-and-DM answer."""

from __future__ import annotations

from app.commands.answer import InChannel
from app.commands.invocation import Invocation
from app.frames.events import MessageCreate
from app.services import Services


def text_command(
    services: Services, user_id: int, channel_id: int, guild_id: int | None, trigger: int
) -> tuple[Invocation, InChannel]:
    who = Invocation(user_id, channel_id, guild_id, trigger, str(trigger))
    return who, InChannel(services.discord, who)


def as_typed(services: Services, message: MessageCreate) -> tuple[Invocation, InChannel]:
    """A logged command message, as the turn hands it over."""
    who = Invocation.of_message(message, str(message.id))
    return who, InChannel(services.discord, who)
