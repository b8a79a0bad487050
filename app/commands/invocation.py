"""One command as given (pure): by whom, where, with which roles, and what triggered it. Both
front ends make one, a text command from its message and a slash command from its
interaction; the commands run on it alone."""

from __future__ import annotations

from dataclasses import dataclass

from app.frames.events import Interaction, MessageCreate


@dataclass(frozen=True, slots=True)
class Invocation:
    """``trigger_id``: the command message's id, or the interaction's (reply targets,
    nonces, ledger triggers); ``event_id``: its inbox event (rate limits, step records, the
    erasure's own event); ``roles``: the member's roles in this guild (none in a DM)."""

    user_id: int
    channel_id: int
    guild_id: int | None
    trigger_id: int
    event_id: str
    roles: tuple[int, ...] = ()

    @classmethod
    def of_message(cls, message: MessageCreate, event_id: str) -> Invocation:
        roles = message.member.roles if message.guild_id is not None and message.member else []
        return cls(
            user_id=message.author.id,
            channel_id=message.channel_id,
            guild_id=message.guild_id,
            trigger_id=message.id,
            event_id=event_id,
            roles=tuple(roles),
        )

    @classmethod
    def of_interaction(cls, interaction: Interaction, event_id: str) -> Invocation:
        roles = interaction.roles if interaction.guild_id is not None else []
        return cls(
            user_id=interaction.author.id,
            channel_id=interaction.channel_id,
            guild_id=interaction.guild_id,
            trigger_id=interaction.id,
            event_id=event_id,
            roles=tuple(roles),
        )
