"""Chat commands: parsed from plain text before anything else (pure).

`!memory show|show all|why <id>|search <words>|export|pause|resume|forget <id>|forget all`
(also as `@bot memory …`), `!forgetme`, and the staff commands
`!bot memory <user>|forget-fact <id>|pin <channel|global> <fact>|unpin <id>` and
`!bot channel [mode <mention|free|off> | persona <text> | persona clear | model <name|clear>]`,
`!bot usage`."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from app.directory.store import Mode

MEMORY_USAGE = (
    "Usage: `!memory show`, `!memory show all`, `!memory why <id>`, "
    "`!memory search <words>`, `!memory export`, "
    "`!memory pause`, `!memory resume`, `!memory forget <id>`, `!memory forget all`."
)
STAFF_USAGE = (
    "Usage: `!bot memory <user>`, `!bot forget-fact <id>`, "
    "`!bot pin <channel|global> <fact>`, `!bot unpin <id>`, `!bot channel`, "
    "`!bot channel mode <mention|free|off>`, `!bot channel persona <text>`, "
    "`!bot channel persona clear`, `!bot channel model <name|clear>`, `!bot usage`."
)


@dataclass(frozen=True, slots=True)
class MemoryShow:
    everything: bool = False


@dataclass(frozen=True, slots=True)
class MemoryWhy:
    memory_id: int


@dataclass(frozen=True, slots=True)
class MemorySearch:
    words: str  # as written (the search tokenizes it)


@dataclass(frozen=True, slots=True)
class MemoryExport:
    pass


@dataclass(frozen=True, slots=True)
class MemoryPause:
    pass


@dataclass(frozen=True, slots=True)
class MemoryResume:
    pass


@dataclass(frozen=True, slots=True)
class MemoryForget:
    memory_id: int


@dataclass(frozen=True, slots=True)
class MemoryForgetAll:
    pass


@dataclass(frozen=True, slots=True)
class ForgetMe:
    pass


@dataclass(frozen=True, slots=True)
class StaffMemory:
    user_id: int


@dataclass(frozen=True, slots=True)
class StaffForgetFact:
    memory_id: int


@dataclass(frozen=True, slots=True)
class StaffPin:
    scope: Literal["channel", "global"]
    fact: str


@dataclass(frozen=True, slots=True)
class StaffUnpin:
    pin_id: int


@dataclass(frozen=True, slots=True)
class StaffChannelShow:
    """`!bot channel`: what holds in this channel."""

    channel_id: int | None = None  # another channel of this guild (a slash option); None: here


@dataclass(frozen=True, slots=True)
class StaffChannelMode:
    mode: Mode
    channel_id: int | None = None


@dataclass(frozen=True, slots=True)
class StaffChannelPersona:
    text: str | None  # None: clear it
    channel_id: int | None = None


@dataclass(frozen=True, slots=True)
class StaffChannelModel:
    name: str | None  # None: clear it (CHAT_MODEL again)
    channel_id: int | None = None


@dataclass(frozen=True, slots=True)
class StaffUsage:
    """`!bot usage`: today's and this month's model calls and tokens here."""


@dataclass(frozen=True, slots=True)
class Usage:
    """An unknown or malformed sub-command: answer with the usage line."""

    text: str


MemoryCommand = (
    MemoryShow
    | MemoryWhy
    | MemorySearch
    | MemoryExport
    | MemoryPause
    | MemoryResume
    | MemoryForget
    | MemoryForgetAll
)
StaffCommand = (
    StaffMemory
    | StaffForgetFact
    | StaffPin
    | StaffUnpin
    | StaffChannelShow
    | StaffChannelMode
    | StaffChannelPersona
    | StaffChannelModel
    | StaffUsage
)
Command = MemoryCommand | StaffCommand | ForgetMe | Usage

_ID = re.compile(r"\d{1,19}")
_USER = re.compile(r"<@!?(\d{1,19})>|(\d{1,19})")
_MAX_ID = 2**63 - 1


def parse_command(content: str, bot_user_id: int) -> Command | None:
    """The command in ``content``, or None when the message is not a command."""
    text = content.strip()
    words = text.split(maxsplit=1)
    if not words:
        return None
    head, rest = words[0].lower(), (words[1] if len(words) > 1 else "")
    if head == "!forgetme":
        return ForgetMe() if not rest.strip() else Usage("Usage: `!forgetme` (no arguments).")
    if head == "!memory":
        return _memory(rest)
    if head == "!bot":
        return _staff(rest)
    if head in (f"<@{bot_user_id}>", f"<@!{bot_user_id}>"):
        after = rest.split(maxsplit=1)
        if after and after[0].lower() == "memory":
            return _memory(after[1] if len(after) > 1 else "")
    return None


def an_id(word: str) -> int | None:
    """A memory or pin id as a person writes it (digits, within a 64-bit id), or None."""
    if _ID.fullmatch(word) and int(word) <= _MAX_ID:
        return int(word)
    return None


def _memory(rest: str) -> MemoryCommand | Usage:
    head = rest.split(maxsplit=1)
    if head and head[0].lower() == "search":
        words = head[1].strip() if len(head) > 1 else ""
        return MemorySearch(words) if words else Usage(MEMORY_USAGE)
    args = rest.split()
    match [a.lower() for a in args]:
        case ["show"]:
            return MemoryShow()
        case ["show", "all"]:
            return MemoryShow(everything=True)
        case ["why", word] if (memory_id := an_id(word)) is not None:
            return MemoryWhy(memory_id)
        case ["export"]:
            return MemoryExport()
        case ["pause"]:
            return MemoryPause()
        case ["resume"]:
            return MemoryResume()
        case ["forget", "all"]:
            return MemoryForgetAll()
        case ["forget", word] if (memory_id := an_id(word)) is not None:
            return MemoryForget(memory_id)
    return Usage(MEMORY_USAGE)


def _staff(rest: str) -> StaffCommand | Usage:
    parts = rest.split(maxsplit=1)
    sub = parts[0].lower() if parts else ""
    arg = parts[1].strip() if len(parts) > 1 else ""
    if sub == "memory" and (user := _USER.fullmatch(arg)):
        user_id = int(user.group(1) or user.group(2))
        return StaffMemory(user_id) if user_id <= _MAX_ID else Usage(STAFF_USAGE)
    if sub == "forget-fact" and (memory_id := an_id(arg)) is not None:
        return StaffForgetFact(memory_id)
    if sub == "unpin" and (pin_id := an_id(arg)) is not None:
        return StaffUnpin(pin_id)
    if sub == "channel":
        return _channel(arg)
    if sub == "usage" and not arg:
        return StaffUsage()
    if sub == "pin":
        scope_fact = arg.split(maxsplit=1)
        if len(scope_fact) == 2 and scope_fact[0].lower() in ("channel", "global"):
            scope: Literal["channel", "global"] = (
                "channel" if scope_fact[0].lower() == "channel" else "global"
            )
            return StaffPin(scope, scope_fact[1].strip())
    return Usage(STAFF_USAGE)


def _channel(arg: str) -> StaffCommand | Usage:
    """`!bot channel`, `… mode <mode>`, `… persona <text>` (as typed), `… persona clear`,
    `… model <name>`, `… model clear`."""
    parts = arg.split(maxsplit=1)
    what = parts[0].lower() if parts else ""
    rest = parts[1].strip() if len(parts) > 1 else ""
    if not what:
        return StaffChannelShow()
    if what == "mode" and rest.lower() in Mode.__members__.values():
        return StaffChannelMode(Mode(rest.lower()))
    if what == "persona" and rest:
        return StaffChannelPersona(None if rest.lower() == "clear" else rest)
    if what == "model" and rest and len(rest.split()) == 1:
        return StaffChannelModel(None if rest.lower() == "clear" else rest)
    return Usage(STAFF_USAGE)
