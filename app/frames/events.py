"""Gateway dispatch frames: strict typed models for the handled types and their de-dup ids.

Pure: parsing and id derivation touch no database, so they are tested on plain data."""

from __future__ import annotations

import hashlib
import json
import re
from datetime import UTC, datetime
from enum import IntEnum, StrEnum
from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError


def _snowflake(value: Any) -> Any:
    # Snowflakes arrive as JSON strings of digits; a bool or float must never pass as an id.
    if isinstance(value, str) and value.isascii() and value.isdigit():
        return int(value)
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    raise ValueError("expected a snowflake (a string of digits)")


Snowflake = Annotated[int, BeforeValidator(_snowflake), Field(ge=0, lt=2**63)]


class EventType(StrEnum):
    MESSAGE_CREATE = "MESSAGE_CREATE"
    MESSAGE_UPDATE = "MESSAGE_UPDATE"
    MESSAGE_DELETE = "MESSAGE_DELETE"
    MESSAGE_DELETE_BULK = "MESSAGE_DELETE_BULK"
    MESSAGE_REACTION_ADD = "MESSAGE_REACTION_ADD"
    MESSAGE_REACTION_REMOVE = "MESSAGE_REACTION_REMOVE"
    MESSAGE_REACTION_REMOVE_ALL = "MESSAGE_REACTION_REMOVE_ALL"
    MESSAGE_REACTION_REMOVE_EMOJI = "MESSAGE_REACTION_REMOVE_EMOJI"
    THREAD_CREATE = "THREAD_CREATE"
    THREAD_UPDATE = "THREAD_UPDATE"
    INTERACTION_CREATE = "INTERACTION_CREATE"


class _Model(BaseModel):
    # Discord adds fields over time; unknown ones are kept in the inbox payload, ignored here.
    model_config = ConfigDict(extra="ignore", frozen=True)


class User(_Model):
    id: Snowflake
    username: str = ""
    global_name: str | None = None
    bot: bool = False


class Member(_Model):
    nick: str | None = None
    roles: list[Snowflake] = Field(default_factory=list)


FORWARD = 1  # a message_reference of this type forwards a message; 0 (DEFAULT) replies to it


class MessageReference(_Model):
    type: int = 0
    message_id: Snowflake | None = None
    channel_id: Snowflake | None = None
    guild_id: Snowflake | None = None


class Attachment(_Model):
    """A file on a message, as Discord describes it (its bytes stay on Discord's CDN)."""

    id: Snowflake
    filename: str = Field(default="", max_length=1024)
    content_type: str | None = Field(default=None, max_length=255)
    size: int = Field(default=0, ge=0)
    url: str = Field(default="", max_length=4096)


class ReferencedMessage(_Model):
    id: Snowflake
    author: User | None = None
    content: str = ""
    timestamp: datetime | None = None


class MessageCreate(_Model):
    id: Snowflake
    channel_id: Snowflake
    guild_id: Snowflake | None = None
    author: User
    member: Member | None = None
    content: str = ""
    timestamp: datetime
    mentions: list[User] = Field(default_factory=list)
    message_reference: MessageReference | None = None
    referenced_message: ReferencedMessage | None = None
    attachments: list[Attachment] = Field(default_factory=list)

    @property
    def author_name(self) -> str:
        nick = self.member.nick if self.member else None
        return nick or self.author.global_name or self.author.username or str(self.author.id)

    @property
    def reply_to_id(self) -> int | None:
        if self.referenced_message is not None:
            return self.referenced_message.id
        return self.message_reference.message_id if self.message_reference else None

    @property
    def reply_to_channel_id(self) -> int:
        """The channel of the message this one replies to (Discord omits it when it is this
        channel)."""
        reference = self.message_reference
        if reference is not None and reference.channel_id is not None:
            return reference.channel_id
        return self.channel_id


class MessageUpdate(_Model):
    id: Snowflake
    channel_id: Snowflake
    guild_id: Snowflake | None = None
    content: str | None = None
    edited_timestamp: datetime | None = None
    author: User | None = None


class MessageDelete(_Model):
    id: Snowflake
    channel_id: Snowflake
    guild_id: Snowflake | None = None


class MessageDeleteBulk(_Model):
    ids: list[Snowflake] = Field(min_length=1)
    channel_id: Snowflake
    guild_id: Snowflake | None = None


class Emoji(_Model):
    id: Snowflake | None = None
    name: str | None = None

    @property
    def value(self) -> str:
        """The signal value: the character itself for unicode, ``name:id`` for custom."""
        return f"{self.name or ''}:{self.id}" if self.id is not None else self.name or ""


class ReactionAdd(_Model):
    user_id: Snowflake
    channel_id: Snowflake
    message_id: Snowflake
    guild_id: Snowflake | None = None
    emoji: Emoji
    message_author_id: Snowflake | None = None


class ReactionRemove(_Model):
    user_id: Snowflake
    channel_id: Snowflake
    message_id: Snowflake
    guild_id: Snowflake | None = None
    emoji: Emoji


class ReactionRemoveAll(_Model):
    channel_id: Snowflake
    message_id: Snowflake
    guild_id: Snowflake | None = None


class ReactionRemoveEmoji(_Model):
    channel_id: Snowflake
    message_id: Snowflake
    guild_id: Snowflake | None = None
    emoji: Emoji


# Discord's thread channel types: announcement, public and private threads.
THREAD_TYPES = frozenset({10, 11, 12})


class Thread(_Model):
    """A THREAD_CREATE / THREAD_UPDATE channel object: what we keep is where it hangs."""

    id: Snowflake
    parent_id: Snowflake
    guild_id: Snowflake | None = None
    name: str = Field(default="", max_length=200)
    type: int | None = None
    owner_id: Snowflake | None = None  # who started it (and so named it)

    @property
    def channel_id(self) -> int:
        """The thread is the channel its messages arrive in (the relay's lane, logs)."""
        return self.id


DISCORD_EPOCH_MS = 1_420_070_400_000


def snowflake_time(snowflake: int) -> datetime:
    """When Discord made the id (its first 42 bits count milliseconds since 2015)."""
    return datetime.fromtimestamp(((snowflake >> 22) + DISCORD_EPOCH_MS) / 1000, UTC)


class InteractionType(IntEnum):
    """The interactions handled: a slash command, and the autocomplete of one of its options
    (Discord's pings, buttons and modals are not ours: ignored)."""

    APPLICATION_COMMAND = 2
    AUTOCOMPLETE = 4


class OptionType(IntEnum):
    """Discord's application command option types (the ones our commands use)."""

    SUB_COMMAND = 1
    SUB_COMMAND_GROUP = 2
    STRING = 3
    INTEGER = 4
    BOOLEAN = 5
    USER = 6
    CHANNEL = 7


class CommandOption(_Model):
    """An option as the person filled it in (a sub-command carries its own options)."""

    name: str = Field(max_length=32)
    type: int
    value: str | int | float | bool | None = None  # smart union: each JSON type as itself
    options: list[CommandOption] = Field(default_factory=list, max_length=25)
    focused: bool = False  # autocomplete: the option being typed


class ResolvedChannel(_Model):
    id: Snowflake
    type: int | None = None
    parent_id: Snowflake | None = None


class Resolved(_Model):
    """The users, members and channels the options name, keyed by their ids."""

    users: dict[str, User] = Field(default_factory=dict)
    channels: dict[str, ResolvedChannel] = Field(default_factory=dict)


class CommandData(_Model):
    name: str = Field(max_length=32)
    type: int = 1  # CHAT_INPUT
    options: list[CommandOption] = Field(default_factory=list, max_length=25)
    resolved: Resolved | None = None


class InteractionMember(Member):
    user: User


class Interaction(_Model):
    """An INTERACTION_CREATE: a slash command or an autocomplete, by a member in a guild
    channel or by a user in a DM. ``token`` answers it (for 15 minutes): never logged."""

    id: Snowflake
    application_id: Snowflake
    type: InteractionType
    token: str = Field(min_length=1, max_length=1000, repr=False)
    data: CommandData
    channel_id: Snowflake
    guild_id: Snowflake | None = None
    member: InteractionMember | None = None
    user: User | None = None

    @property
    def author(self) -> User:
        """Who gave it (a guild's member, or the user of a DM)."""
        if self.member is not None:
            return self.member.user
        assert self.user is not None  # checked when parsed
        return self.user

    @property
    def roles(self) -> list[int]:
        """The member's roles in this guild (none in a DM)."""
        return list(self.member.roles) if self.member is not None else []

    @property
    def created_at(self) -> datetime:
        return snowflake_time(self.id)


def _has_author(interaction: Interaction) -> Interaction:
    if interaction.member is None and interaction.user is None:
        raise ValueError("an interaction names its member (in a guild) or its user (in a DM)")
    return interaction


EventData = (
    MessageCreate
    | MessageUpdate
    | MessageDelete
    | MessageDeleteBulk
    | ReactionAdd
    | ReactionRemove
    | ReactionRemoveAll
    | ReactionRemoveEmoji
    | Thread
    | Interaction
)

MODELS: dict[EventType, type[EventData]] = {
    EventType.MESSAGE_CREATE: MessageCreate,
    EventType.MESSAGE_UPDATE: MessageUpdate,
    EventType.MESSAGE_DELETE: MessageDelete,
    EventType.MESSAGE_DELETE_BULK: MessageDeleteBulk,
    EventType.MESSAGE_REACTION_ADD: ReactionAdd,
    EventType.MESSAGE_REACTION_REMOVE: ReactionRemove,
    EventType.MESSAGE_REACTION_REMOVE_ALL: ReactionRemoveAll,
    EventType.MESSAGE_REACTION_REMOVE_EMOJI: ReactionRemoveEmoji,
    EventType.THREAD_CREATE: Thread,
    EventType.THREAD_UPDATE: Thread,
    EventType.INTERACTION_CREATE: Interaction,
}


_MENTION = re.compile(r"<@!?(\d{1,19})>")


def mentions_in(text: str) -> set[int]:
    """The user ids a message text mentions (`<@id>`, `<@!id>`)."""
    return {int(found) for found in _MENTION.findall(text)}


class FrameError(ValueError):
    """The frame cannot be accepted; ``problems`` says why, field by field."""

    def __init__(self, problems: list[dict[str, str]]) -> None:
        super().__init__("; ".join(f"{p['field']}: {p['problem']}" for p in problems))
        self.problems = problems


class Ignored:
    """A frame whose type we do not handle."""


IGNORED = Ignored()


class Event(BaseModel):
    """A validated dispatch frame: its type, its typed data, its de-duplication id."""

    model_config = ConfigDict(frozen=True)

    type: EventType
    data: EventData
    dedupe_id: str
    kind: Literal["event"] = "event"

    @property
    def author_id(self) -> int | None:
        """Who acted: the message's author, the person who reacted, a thread's owner."""
        match self.data:
            case MessageCreate(author=author):
                return author.id
            case MessageUpdate(author=author):
                return author.id if author is not None else None
            case ReactionAdd(user_id=user_id) | ReactionRemove(user_id=user_id):
                return user_id
            case Thread(owner_id=owner_id):
                return owner_id  # a thread's name is its owner's words
            case Interaction():
                return self.data.author.id
        return None

    @property
    def message_id(self) -> int | None:
        """The one message the event is about (none for a bulk delete)."""
        match self.data:
            case MessageCreate(id=message_id) | MessageUpdate(id=message_id):
                return message_id
            case MessageDelete(id=message_id):
                return message_id
            case MessageDeleteBulk() | Thread() | Interaction():
                return None
        return self.data.message_id


def decode_body(body: bytes) -> str:
    """The body as text: the gateway sends UTF-8 JSON, and nothing else is accepted."""
    try:
        return body.decode("utf-8")
    except UnicodeDecodeError:
        raise FrameError([{"field": "body", "problem": "not UTF-8 text"}]) from None


def parse_frame(text: str, session: str | None = None) -> Event | Ignored:
    """Parse a request body into an Event; Ignored for types we do not handle. ``session``:
    the relay's ``x-discord-gateway-session`` header, when it sent one."""
    try:
        frame = json.loads(text)
    except (ValueError, RecursionError):
        # ValueError covers JSONDecodeError and over-long integer literals.
        raise FrameError([{"field": "body", "problem": "not valid JSON"}]) from None
    if not isinstance(frame, dict):
        raise FrameError([{"field": "body", "problem": "expected a JSON object"}])
    return parse_dispatch(frame, session)


def parse_dispatch(frame: dict[str, Any], session: str | None = None) -> Event | Ignored:
    t = frame.get("t")
    if not isinstance(t, str) or t not in EventType.__members__:
        return IGNORED
    event_type = EventType(t)
    d = frame.get("d")
    if not isinstance(d, dict):
        raise FrameError([{"field": "d", "problem": f"{t} needs an object in d"}])
    if event_type is EventType.INTERACTION_CREATE and d.get("type") not in INTERACTION_TYPES:
        return IGNORED  # a ping, a button, a modal: not ours
    try:
        data = MODELS[event_type].model_validate(d)
        if isinstance(data, Interaction):
            _has_author(data)
    except (ValidationError, ValueError) as exc:
        raise FrameError(_problems(exc)) from None
    seq = frame.get("s")
    return Event(
        type=event_type,
        data=data,
        dedupe_id=dedupe_id(event_type, data, session=session, seq=seq),
    )


INTERACTION_TYPES = frozenset(t.value for t in InteractionType)


def _problems(exc: ValueError) -> list[dict[str, str]]:
    if not isinstance(exc, ValidationError):
        return [{"field": "d", "problem": str(exc)}]
    return [
        {"field": "d." + ".".join(str(p) for p in err["loc"]), "problem": err["msg"]}
        for err in exc.errors(include_url=False, include_input=False)
    ]


def _digest(*parts: object) -> str:
    joined = "\x1f".join(str(p) for p in parts)
    # surrogatepass: a lone surrogate must still hash (the insert refuses it later, as 422).
    return hashlib.sha256(joined.encode("utf-8", "surrogatepass")).hexdigest()[:24]


def _gateway_position(session: object, seq: object) -> str | None:
    """``<session>:<s>`` when both are usable: a gateway session id is short printable ASCII
    (Discord's are 32 hex digits), a sequence a non-negative integer."""
    if not isinstance(session, str) or not 0 < len(session) <= 128:
        return None
    if not (session.isascii() and session.isprintable()):
        return None
    if not isinstance(seq, int) or isinstance(seq, bool) or seq < 0:
        return None
    return f"{session}:{seq}"


def dedupe_id(
    event_type: EventType, data: EventData, *, session: object = None, seq: object = None
) -> str:
    """A stable id per event: a replay of the same event always maps to the same id.

    Events without a Discord id of their own (reactions, bulk deletes) are keyed by their
    place in the gateway session (``session``, the frame's ``s``) when the relay sent it: a
    RESUME replays the same place, while removing and adding a reaction again is a new one.
    Without it, by their content (so a genuine re-add then reads as a replay)."""
    positional = isinstance(data, _POSITIONAL) or event_type is EventType.THREAD_UPDATE
    if positional and (position := _gateway_position(session, seq)):
        return f"{_POSITIONAL_PREFIX[event_type]}@{position}"
    match data:
        case MessageCreate(id=message_id):
            return str(message_id)
        case MessageUpdate():
            version = data.edited_timestamp.isoformat() if data.edited_timestamp else None
            return f"update:{data.id}:{version or _digest(data.content)}"
        case MessageDelete():
            return f"delete:{data.id}"
        case MessageDeleteBulk():
            return f"delete-bulk:{data.channel_id}:{_digest(*sorted(data.ids))}"
        case ReactionAdd() | ReactionRemove():
            action = "add" if event_type is EventType.MESSAGE_REACTION_ADD else "remove"
            return f"reaction:{data.message_id}:{data.user_id}:{data.emoji.value}:{action}"
        case ReactionRemoveAll():
            return f"reaction-clear:{data.message_id}"
        case ReactionRemoveEmoji():
            return f"reaction-clear-emoji:{data.message_id}:{data.emoji.value}"
        case Thread() if event_type is EventType.THREAD_CREATE:
            return f"thread-create:{data.id}"
        case Thread():
            return f"thread-update:{data.id}:{_digest(data.parent_id, data.name, data.type)}"
        case Interaction(id=interaction_id):
            return f"interaction:{interaction_id}"
    raise AssertionError(f"unhandled event data {type(data).__name__}")


# Messages are keyed by their own id (edits by id and version, deletes by id), a thread's
# creation by the thread's id: unchanged. A thread update has no version of its own.
_POSITIONAL = (
    MessageDeleteBulk,
    ReactionAdd,
    ReactionRemove,
    ReactionRemoveAll,
    ReactionRemoveEmoji,
)
_POSITIONAL_PREFIX = {
    EventType.MESSAGE_DELETE_BULK: "delete-bulk",
    EventType.MESSAGE_REACTION_ADD: "reaction-add",
    EventType.MESSAGE_REACTION_REMOVE: "reaction-remove",
    EventType.MESSAGE_REACTION_REMOVE_ALL: "reaction-clear",
    EventType.MESSAGE_REACTION_REMOVE_EMOJI: "reaction-clear-emoji",
    EventType.THREAD_UPDATE: "thread-update",
}
