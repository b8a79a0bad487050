"""A memory as plain data, and the ledger's one JSON codec: what the store hands out and
records, with no database in sight (pure, tested without one)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from app.channel.exchange import Place
from app.vocabulary import FORGOT_MEMORY, FORGOT_PERSON, Actor, SkipReason

REDACTED: dict[str, Any] = {"redacted": True}


@dataclass(frozen=True, slots=True)
class Origin:
    """Where a memory was learned, which bounds where it may be recalled: a guild (only in
    that guild, and in its owner's DMs), a DM or unknown (only in its owner's DMs), or
    ``any`` (a row written by hand, with no origin: anywhere its owner speaks)."""

    kind: str = "any"
    guild_id: int | None = None

    @classmethod
    def learned_in(cls, place: Place | None) -> Origin:
        if place is None:
            return UNKNOWN
        return DM_ONLY if place.is_dm else cls("guild", place.guild_id)

    def narrowed_by(self, place: Place | None) -> Origin:
        """The origin after learning more in ``place``: never wider than either. A memory
        that now holds what was said in two places is visible only where both are."""
        other = Origin.learned_in(place)
        if self.kind == "any":
            return other
        if UNKNOWN in (self, other):
            return UNKNOWN
        return self if self == other else DM_ONLY

    def visible_in(self, place: Place) -> bool:
        if place.is_dm or self.kind == "any":
            return True
        return self.kind == "guild" and self.guild_id == place.guild_id


ANY = Origin("any")
DM_ONLY = Origin("dm")
UNKNOWN = Origin("unknown")


@dataclass(frozen=True, slots=True)
class MemoryRecord:
    """One memory as plain data: what callers read, and what the ledger records."""

    id: int
    user_id: int
    content: str
    source: str = "self"
    created_at: datetime | None = None
    updated_at: datetime | None = None
    origin: Origin = ANY


@dataclass(frozen=True, slots=True)
class SourceMessage:
    """A message a memory was learned from, and the batch it came in."""

    message_id: int
    channel_id: int
    guild_id: int | None
    trigger: str | None = None
    created_at: datetime | None = None


@dataclass(frozen=True, slots=True)
class Why:
    """Who reads or changes a profile, and why: every ledger row carries this."""

    actor: Actor
    reason: str = ""
    run_id: int | None = None
    trigger: str | None = None


TURN_TRIGGER = "turn:"


def turn_trigger(event_id: str) -> str:
    """The trigger of a reply prompt's read: which turn read which memories (an erasure
    blanks the replies whose prompt held the erased person's)."""
    return f"{TURN_TRIGGER}{event_id}"


def turn_of(trigger: str) -> str | None:
    """The event id of a reply read's trigger; None for any other trigger."""
    return trigger.removeprefix(TURN_TRIGGER) if trigger.startswith(TURN_TRIGGER) else None


@dataclass(frozen=True, slots=True)
class LogEntry:
    """One ledger row of a change, as the rollback planner needs it."""

    id: int
    memory_id: int | None
    user_id: int
    action: str
    before: Mapping[str, Any] | None
    after: Mapping[str, Any] | None


@dataclass(frozen=True, slots=True)
class LedgerRow:
    """One ledger row as the person, staff or an operator may see it."""

    id: int
    memory_id: int | None
    user_id: int
    actor: str
    action: str
    reason: str
    before: Any
    after: Any
    run_id: int | None
    created_at: datetime


@dataclass(frozen=True, slots=True)
class Provenance:
    """A memory with where it came from and everything that changed it since."""

    record: MemoryRecord
    sources: list[SourceMessage]
    changes: list[LedgerRow]  # oldest first, reads left out


@dataclass(frozen=True, slots=True)
class ReadCount:
    """How many times a person's memories were read by one actor in one month (UTC,
    ``YYYY-MM``): what an export shows of the ledger's reads instead of listing them."""

    actor: str
    month: str
    reads: int


@dataclass(frozen=True, slots=True)
class Forgetting:
    """One ledger row that forgot something: its id (to order it against a run's changes),
    who forgot it, and whether it forgot one memory or everything of its owner."""

    ledger_id: int
    actor: Actor
    whole_person: bool = False

    @property
    def whenever(self) -> bool:
        """Holds whatever the order (retention: the text is gone)."""
        return self.actor is Actor.RETENTION

    @property
    def reason(self) -> SkipReason:
        return (FORGOT_PERSON if self.whole_person else FORGOT_MEMORY)[self.actor]


@dataclass(frozen=True, slots=True)
class Forgotten:
    """Everything forgotten that touches a run's memories: per memory (its owner or staff
    deleted it, retention expired it, an erasure removed it) and per person (they ran
    `!memory forget all`, or were erased). Nothing here may come back."""

    memories: Mapping[int, Sequence[Forgetting]] = field(default_factory=dict)
    people: Mapping[int, Sequence[Forgetting]] = field(default_factory=dict)

    def reason_for(self, entry: LogEntry) -> SkipReason | None:
        """Why undoing ``entry`` would bring back something forgotten, or None."""
        assert entry.memory_id is not None
        found = [*self.memories.get(entry.memory_id, ()), *self.people.get(entry.user_id, ())]
        for forgetting in sorted(found, key=lambda f: f.ledger_id):
            if forgetting.whenever or forgetting.ledger_id > entry.id:
                return forgetting.reason
        return None


# --- the ledger's JSON codec (the only one) -----------------------------------------------


def encode(record: MemoryRecord) -> dict[str, Any]:
    """A memory as the ledger's before/after JSON (snowflakes as strings)."""
    return {
        "id": record.id,
        "user_id": str(record.user_id),
        "content": record.content,
        "source": record.source,
        "created_at": record.created_at.isoformat() if record.created_at else None,
        "updated_at": record.updated_at.isoformat() if record.updated_at else None,
        "origin": record.origin.kind,
        "origin_guild_id": str(record.origin.guild_id) if record.origin.guild_id else None,
    }


def _decode_origin(data: Mapping[str, Any]) -> Origin:
    kind = data.get("origin")
    if kind not in ("any", "guild", "dm", "unknown"):
        return UNKNOWN  # recorded before origins existed: private
    guild = data.get("origin_guild_id")
    if kind == "guild":
        return (
            Origin("guild", int(guild)) if isinstance(guild, str) and guild.isdigit() else UNKNOWN
        )
    return Origin(kind)


def decode(memory_id: int, user_id: int, data: Mapping[str, Any] | None) -> MemoryRecord | None:
    """A memory as the ledger recorded it; None when there is no text (absent or redacted)."""
    content = data.get("content") if data else None
    if not isinstance(content, str) or data is None:
        return None
    source = data.get("source")
    return MemoryRecord(
        id=memory_id,
        user_id=user_id,
        content=content,
        source=source if isinstance(source, str) else "self",
        created_at=_time(data.get("created_at")),
        updated_at=_time(data.get("updated_at")),
        origin=_decode_origin(data),
    )


def recorded_content(data: Mapping[str, Any] | None) -> str | None:
    value = data.get("content") if data else None
    return value if isinstance(value, str) else None


def _time(value: object) -> datetime | None:
    if isinstance(value, datetime):
        return value
    if isinstance(value, str):
        try:
            return datetime.fromisoformat(value)
        except ValueError:
            return None
    return None
