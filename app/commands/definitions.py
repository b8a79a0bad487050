"""The application (slash) commands as Discord registers them (pure data): the same commands
as the text ones, with typed options. ``python -m app register-commands`` sends this list;
``app/commands/slash.py`` reads what Discord sends back when one is used."""

from __future__ import annotations

from enum import StrEnum
from typing import Any

from app.directory.store import MAX_PERSONA_CHARS, Mode
from app.frames.events import OptionType
from app.pins.store import MAX_PIN_CHARS

CHAT_INPUT = 1
GUILD, BOT_DM = 0, 1  # interaction contexts: a guild's channels, the bot's DMs
GUILD_INSTALL = 0
# Who sees `/bot` by default: members who may manage the server. A server's admins can grant
# it to the staff role (Server Settings → Integrations); our own authority decides anyway.
MANAGE_GUILD = 1 << 5
SEARCH_MAX_CHARS = 200


class Name(StrEnum):
    """Command, sub-command and option names slash.py branches on."""

    MEMORY = "memory"
    FORGETME = "forgetme"
    BOT = "bot"
    SHOW = "show"
    ALL = "all"
    SEARCH = "search"
    WORDS = "words"
    WHY = "why"
    ID = "id"
    FORGET = "forget"
    WHICH = "memory"  # /memory forget's option: an id, or "all"
    EXPORT = "export"
    PAUSE = "pause"
    RESUME = "resume"
    USER = "user"
    FORGET_FACT = "forget-fact"
    PIN = "pin"
    SCOPE = "scope"
    FACT = "fact"
    UNPIN = "unpin"
    CHANNEL = "channel"
    MODE = "mode"
    PERSONA = "persona"
    PERSONA_CLEAR = "persona-clear"
    MODEL = "model"
    MODEL_CLEAR = "model-clear"
    NAME = "name"
    TEXT = "text"
    USAGE = "usage"


# The options whose values autocomplete offers from the asker's own memories.
MEMORY_ID_OPTIONS = {(Name.MEMORY, Name.WHY, Name.ID), (Name.MEMORY, Name.FORGET, Name.WHICH)}


def _option(kind: OptionType, name: Name, description: str, **more: Any) -> dict[str, Any]:
    return {"type": int(kind), "name": name.value, "description": description, **more}


def _sub(name: Name, description: str, *options: dict[str, Any]) -> dict[str, Any]:
    return _option(OptionType.SUB_COMMAND, name, description, options=list(options))


def _here(description: str = "A channel of this server (default: this one)") -> dict[str, Any]:
    return _option(OptionType.CHANNEL, Name.CHANNEL, description, channel_types=[0, 5, 10, 11, 12])


def memory_command() -> dict[str, Any]:
    memory_id = "One of your memories (type to search them)"
    return _command(
        Name.MEMORY,
        "What I remember about you, only you can see the answers",
        [
            _sub(
                Name.SHOW,
                "Your ten newest memories, or all of them",
                _option(OptionType.BOOLEAN, Name.ALL, "Every memory, not just the ten newest"),
            ),
            _sub(
                Name.SEARCH,
                "Your memories that match some words",
                _option(
                    OptionType.STRING,
                    Name.WORDS,
                    "What to look for",
                    required=True,
                    max_length=SEARCH_MAX_CHARS,
                ),
            ),
            _sub(
                Name.WHY,
                "Where one memory came from",
                _option(
                    OptionType.INTEGER,
                    Name.ID,
                    memory_id,
                    required=True,
                    min_value=1,
                    autocomplete=True,
                ),
            ),
            _sub(
                Name.FORGET,
                "Forget one memory, or all of them",
                _option(
                    OptionType.STRING,
                    Name.WHICH,
                    "One of your memories, or “all”",
                    required=True,
                    autocomplete=True,
                    max_length=20,
                ),
            ),
            _sub(Name.EXPORT, "Everything I keep about you, as a JSON file"),
            _sub(Name.PAUSE, "Stop learning anything new about you"),
            _sub(Name.RESUME, "Start learning about you again"),
        ],
    )


def forgetme_command() -> dict[str, Any]:
    return _command(
        Name.FORGETME, "Erase everything I have from you, and stop learning about you", []
    )


def bot_command() -> dict[str, Any]:
    """The staff commands: hidden from members by default, checked by our authority."""
    modes = [{"name": mode.value, "value": mode.value} for mode in Mode]
    scopes = [{"name": scope, "value": scope} for scope in ("channel", "global")]
    channel = _option(
        OptionType.SUB_COMMAND_GROUP,
        Name.CHANNEL,
        "How I behave in a channel",
        options=[
            _sub(Name.SHOW, "What holds in the channel", _here()),
            _sub(
                Name.MODE,
                "When I answer in the channel",
                _option(OptionType.STRING, Name.MODE, "The mode", required=True, choices=modes),
                _here(),
            ),
            _sub(
                Name.PERSONA,
                "Add to my persona's style in the channel",
                _option(
                    OptionType.STRING,
                    Name.TEXT,
                    "The addition",
                    required=True,
                    max_length=MAX_PERSONA_CHARS,
                ),
                _here(),
            ),
            _sub(Name.PERSONA_CLEAR, "Remove the channel's persona addition", _here()),
            _sub(
                Name.MODEL,
                "The chat model I use in the channel (one of CHAT_MODELS)",
                _option(OptionType.STRING, Name.NAME, "The model", required=True, max_length=200),
                _here(),
            ),
            _sub(Name.MODEL_CLEAR, "Use the default chat model in the channel again", _here()),
        ],
    )
    command = _command(
        Name.BOT,
        "Staff: memories, pins and channel settings of this server",
        [
            _sub(
                Name.MEMORY,
                "A member's memories learned in this server",
                _option(OptionType.USER, Name.USER, "Whose", required=True),
            ),
            _sub(
                Name.FORGET_FACT,
                "Delete a memory learned in this server",
                _option(OptionType.INTEGER, Name.ID, "The memory's id", required=True, min_value=1),
            ),
            _sub(
                Name.PIN,
                "Pin a fact for this channel, or (operators) for every channel",
                _option(OptionType.STRING, Name.SCOPE, "Where", required=True, choices=scopes),
                _option(
                    OptionType.STRING,
                    Name.FACT,
                    "The fact",
                    required=True,
                    max_length=MAX_PIN_CHARS,
                ),
            ),
            _sub(
                Name.UNPIN,
                "Remove a pin",
                _option(OptionType.INTEGER, Name.ID, "The pin's id", required=True, min_value=1),
            ),
            channel,
            _sub(Name.USAGE, "Today's and this month's model calls and tokens here"),
        ],
    )
    return {**command, "default_member_permissions": MANAGE_GUILD}


def _command(name: Name, description: str, options: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "type": CHAT_INPUT,
        "name": name.value,
        "description": description,
        "options": options,
        "contexts": [GUILD, BOT_DM],
        "integration_types": [GUILD_INSTALL],
    }


def application_commands() -> list[dict[str, Any]]:
    """Every command, as ``PUT /applications/{id}/commands`` takes them."""
    return [memory_command(), forgetme_command(), bot_command()]
