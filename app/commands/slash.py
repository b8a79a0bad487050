"""The slash front end's reading of an interaction (pure): the command values the text parser
makes (``app/commands/parser.py``), from typed options instead of words, so both front ends
run the same code; and the autocomplete choices offered for a memory id."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from app.commands.definitions import MEMORY_ID_OPTIONS, Name
from app.commands.parser import (
    MEMORY_USAGE,
    STAFF_USAGE,
    Command,
    ForgetMe,
    MemoryExport,
    MemoryForget,
    MemoryForgetAll,
    MemoryPause,
    MemoryResume,
    MemorySearch,
    MemoryShow,
    MemoryWhy,
    StaffChannelMode,
    StaffChannelModel,
    StaffChannelPersona,
    StaffChannelShow,
    StaffForgetFact,
    StaffMemory,
    StaffPin,
    StaffUnpin,
    StaffUsage,
    Usage,
    an_id,
)
from app.commands.render import preview
from app.directory.store import Mode
from app.frames.events import CommandData, OptionType
from app.memory.records import MemoryRecord

MAX_CHOICES = 25  # Discord shows at most 25 autocomplete choices
CHOICE_NAME_CHARS = 100
FORGET_ALL_CHOICE = {"name": "all: forget every memory", "value": "all"}
_GROUPS = (OptionType.SUB_COMMAND, OptionType.SUB_COMMAND_GROUP)


@dataclass(frozen=True, slots=True)
class Used:
    """What was used: the command's path (``memory forget``, ``bot channel mode``) and its
    options' values by name."""

    path: tuple[str, ...]
    values: dict[str, Any]
    focused: str | None = None  # autocomplete: the option being typed


def used(data: CommandData) -> Used:
    path, options = [data.name], data.options
    while len(options) == 1 and options[0].type in _GROUPS:
        path.append(options[0].name)
        options = options[0].options
    focused = next((o.name for o in options if o.focused), None)
    return Used(tuple(path), {o.name: o.value for o in options}, focused)


def slash_command(data: CommandData) -> Command:
    """The command a slash command stands for; an unknown one (an old registration, say)
    gets the usage line, as an unknown text command does."""
    use = used(data)
    head = use.path[0]
    if head == Name.FORGETME:
        return ForgetMe()
    if head == Name.MEMORY:
        return _memory(use)
    if head == Name.BOT:
        return _staff(use)
    return Usage(MEMORY_USAGE)


def _memory(use: Used) -> Command:
    values = use.values
    match use.path[1:]:
        case (Name.SHOW,):
            return MemoryShow(everything=values.get(Name.ALL) is True)
        case (Name.SEARCH,) if isinstance(words := values.get(Name.WORDS), str) and words.strip():
            return MemorySearch(words.strip())
        case (Name.WHY,) if (memory_id := _id(values.get(Name.ID))) is not None:
            return MemoryWhy(memory_id)
        case (Name.FORGET,):
            which = str(values.get(Name.WHICH) or "").strip().lower()
            if which == Name.ALL:
                return MemoryForgetAll()
            if (memory_id := an_id(which)) is not None:
                return MemoryForget(memory_id)
        case (Name.EXPORT,):
            return MemoryExport()
        case (Name.PAUSE,):
            return MemoryPause()
        case (Name.RESUME,):
            return MemoryResume()
    return Usage(MEMORY_USAGE)


def _staff(use: Used) -> Command:
    values = use.values
    match use.path[1:]:
        case (Name.MEMORY,) if (user_id := _id(values.get(Name.USER))) is not None:
            return StaffMemory(user_id)
        case (Name.FORGET_FACT,) if (memory_id := _id(values.get(Name.ID))) is not None:
            return StaffForgetFact(memory_id)
        case (Name.PIN,) if values.get(Name.SCOPE) in ("channel", "global"):
            fact = str(values.get(Name.FACT) or "").strip()
            if fact:
                return StaffPin("channel" if values[Name.SCOPE] == "channel" else "global", fact)
        case (Name.UNPIN,) if (pin_id := _id(values.get(Name.ID))) is not None:
            return StaffUnpin(pin_id)
        case (Name.USAGE,):
            return StaffUsage()
        case (Name.CHANNEL, *rest):
            return _channel(rest, values)
    return Usage(STAFF_USAGE)


def _channel(rest: Sequence[str], values: dict[str, Any]) -> Command:
    channel_id = _id(values.get(Name.CHANNEL))
    match tuple(rest):
        case (Name.SHOW,):
            return StaffChannelShow(channel_id)
        case (Name.MODE,) if values.get(Name.MODE) in Mode.__members__.values():
            return StaffChannelMode(Mode(values[Name.MODE]), channel_id)
        case (Name.PERSONA,) if isinstance(text := values.get(Name.TEXT), str) and text.strip():
            return StaffChannelPersona(text.strip(), channel_id)
        case (Name.PERSONA_CLEAR,):
            return StaffChannelPersona(None, channel_id)
        case (Name.MODEL,) if isinstance(name := values.get(Name.NAME), str) and name.strip():
            return StaffChannelModel(name.strip(), channel_id)
        case (Name.MODEL_CLEAR,):
            return StaffChannelModel(None, channel_id)
    return Usage(STAFF_USAGE)


def _id(value: Any) -> int | None:
    """An id option's value: Discord sends users and channels as strings, integers as
    numbers; anything else is no id."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value if 0 < value < 2**63 else None
    return an_id(value.strip()) if isinstance(value, str) else None


# --- autocomplete -----------------------------------------------------------------------------


def wants_memory_ids(use: Used) -> bool:
    """Whether the option being typed takes one of the asker's memory ids."""
    return use.focused is not None and (*use.path, use.focused) in MEMORY_ID_OPTIONS


def typed(use: Used) -> str:
    """What the person has typed so far into the focused option."""
    value = use.values.get(use.focused or "")
    return "" if value is None else str(value).strip()[:100]


def memory_choices(memories: Sequence[MemoryRecord], use: Used) -> list[dict[str, Any]]:
    """Autocomplete choices: each memory as its id and the start of its text (the value is
    the id, as the option's type takes it); `/memory forget` also offers "all"."""
    integer = use.path[-1] == Name.WHY
    choices: list[dict[str, Any]] = []
    text = typed(use).lower()
    if use.path[-1] == Name.FORGET and Name.ALL.startswith(text):
        choices.append(FORGET_ALL_CHOICE)
    for memory in memories[: MAX_CHOICES - len(choices)]:
        name = f"{memory.id} · {preview(memory.content)}"[:CHOICE_NAME_CHARS]
        choices.append({"name": name, "value": memory.id if integer else str(memory.id)})
    return choices
