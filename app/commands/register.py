"""`python -m app register-commands [--guild ID]`: register the slash commands with Discord,
globally or in one guild (a guild's appear at once; global ones may take a while to reach
every client). A bulk overwrite: run it again after an upgrade, and as often as you like —
the set is replaced, never doubled. The application's id is asked of Discord
(``GET /applications/@me``): the bot's user id is not always it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from app.commands.definitions import application_commands
from app.discord.client import DiscordClient


@dataclass(frozen=True, slots=True)
class Registered:
    application_id: int
    guild_id: int | None
    names: list[str]

    def render(self) -> str:
        where = f"in guild {self.guild_id}" if self.guild_id is not None else "globally"
        listed = ", ".join(f"/{name}" for name in self.names)
        return f"registered {len(self.names)} commands {where}: {listed}"


async def register_commands(discord: DiscordClient, *, guild_id: int | None) -> Registered:
    application: dict[str, Any] = await discord.get_application()
    application_id = int(application["id"])
    commands = application_commands()
    registered = await discord.set_commands(application_id, commands, guild_id=guild_id)
    return Registered(application_id, guild_id, [str(c["name"]) for c in registered])
