"""Pure text and JSON for the memory commands: what a person (or staff) is shown."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any

from app.memory.records import (
    LedgerRow,
    MemoryRecord,
    Origin,
    Provenance,
    ReadCount,
    SourceMessage,
)
from app.vocabulary import Action

PREVIEW_CHARS = 80
NO_MEMORIES = "I don't have any memories about you."
JUMP = "https://discord.com/channels/{guild}/{channel}/{message}"

# Who or what made a change, as the ledger's actor names it.
ACTORS = {
    "extraction": "what you told me in a conversation",
    "reply": "a reply",
    "command": "you, with a command",
    "nightly": "the nightly review",
    "consolidation": "the channel summary",
    "staff": "a staff member",
    "retention": "the retention limit",
    "forgetme": "`!forgetme`",
    "admin": "an operator",
}
ACTIONS = {
    "add": "learned",
    "update": "updated",
    "delete": "deleted",
    "rollback": "undone by an operator",
}


def preview(content: str) -> str:
    """The first 80 characters, on one line; an ellipsis says there was more."""
    flat = " ".join(content.split())
    return flat if len(flat) <= PREVIEW_CHARS else flat[:PREVIEW_CHARS] + "…"


def not_found(memory_id: int) -> str:
    # Identical for "someone else's" and "no such id": ids cannot be probed.
    return f"I couldn't find a memory with id {memory_id} among yours."


def where(origin: Origin, *, here: int | None) -> str:
    """Where a memory was learned, seen from where the person asked (``here``: a guild id,
    or None in a DM)."""
    match origin.kind:
        case "guild" if origin.guild_id == here:
            return "this server"
        case "guild":
            return f"server {origin.guild_id}"
        case "dm":
            return "our DMs"
        case "unknown":
            return "before I recorded where (kept to our DMs)"
    return "added by hand"


def listing(memories: Sequence[MemoryRecord], *, total: int, paused: bool, here: int | None) -> str:
    """The DM for `!memory show`: the ten newest (seed 000) and how many more there are."""
    if not memories:
        return NO_MEMORIES + _pause_line(paused)
    lines = [
        listing_heading(everything=False),
        *(listing_line(m, here) for m in memories),
        *listing_footer(more=total - len(memories), paused=paused),
    ]
    return "\n".join(lines)


def listing_heading(*, everything: bool) -> str:
    heading = "Everything" if everything else "What"
    return f"{heading} I remember about you (id · where I learned it · the note):"


def listing_line(memory: MemoryRecord, here: int | None) -> str:
    return f"`{memory.id}` · {where(memory.origin, here=here)} · {preview(memory.content)}"


def listing_footer(*, more: int, paused: bool) -> list[str]:
    """The lines after a listing's memories: how many more, the pause state, what to do."""
    tail = [f"…and {more} more: `!memory show all` lists every one."] if more > 0 else []
    pause = [_pause_line(paused).strip()] if paused else []
    return [
        *tail,
        *pause,
        "",
        "Where one came from: `!memory why <id>` · remove one: `!memory forget <id>` · "
        "everything: `!memory forget all`",
    ]


def _pause_line(paused: bool) -> str:
    return "\nLearning about you is paused (`!memory resume` turns it back on)." if paused else ""


def search_results(memories: Sequence[MemoryRecord], *, words: str, here: int | None) -> str:
    """The DM for `!memory search <words>`: the matches, best first."""
    asked = preview(words)
    if not memories:
        return f"None of your memories match “{asked}”."
    lines = [listing_line(m, here) for m in memories]
    return (
        f"Your memories that match “{asked}”, best first (id · where I learned it · the note):\n"
        + "\n".join(lines)
        + "\n\nWhere one came from: `!memory why <id>` · remove one: `!memory forget <id>`"
    )


def jump_link(source: SourceMessage) -> str:
    guild = source.guild_id if source.guild_id is not None else "@me"
    return JUMP.format(guild=guild, channel=source.channel_id, message=source.message_id)


def _at(moment: datetime | None) -> str:
    return moment.strftime("%Y-%m-%d %H:%M UTC") if moment is not None else "an unknown time"


def provenance(found: Provenance, *, here: int | None) -> str:
    """The DM for `!memory why <id>`."""
    record = found.record
    lines = [
        f"Memory `{record.id}`: {preview(record.content)}",
        f"Learned {_at(record.created_at)} in {where(record.origin, here=here)}.",
    ]
    if found.sources:
        lines.append("From these messages:")
        lines += [f"- {jump_link(s)}" for s in found.sources]
    else:
        lines.append("I have no record of the exact messages it came from.")
    later = [row for row in found.changes if row.action != Action.ADD]
    if later:
        lines.append("Changes since:")
        lines += [_change(row) for row in later]
    return "\n".join(lines)


def _change(row: LedgerRow) -> str:
    what = ACTIONS.get(row.action, row.action)
    who = ACTORS.get(row.actor, row.actor)
    why = f" ({row.reason})" if row.reason else ""
    return f"- {_at(row.created_at)}: {what} by {who}{why}"


def memory_json(record: MemoryRecord, sources: Sequence[SourceMessage]) -> dict[str, Any]:
    return {
        "id": record.id,
        "content": record.content,
        "source": record.source,
        "origin": {
            "kind": record.origin.kind,
            "guild_id": str(record.origin.guild_id) if record.origin.guild_id else None,
        },
        "created_at": record.created_at.isoformat() if record.created_at else None,
        "updated_at": record.updated_at.isoformat() if record.updated_at else None,
        "sources": [
            {
                "message_id": str(s.message_id),
                "channel_id": str(s.channel_id),
                "guild_id": str(s.guild_id) if s.guild_id is not None else None,
                "link": jump_link(s),
                "batch": s.trigger,
            }
            for s in sources
        ],
    }


def export_head(
    user_id: int, now: datetime, paused: datetime | None, reads: Sequence[ReadCount]
) -> Callable[[int], dict[str, Any]]:
    """The fields each export file starts with (its number among the files); the first
    also says whether learning is paused and how often the memories were read."""
    common = {"user_id": str(user_id), "exported_at": now.isoformat()}
    first = {
        "learning_paused": paused is not None,
        "paused_at": paused.isoformat() if paused else None,
        "reads": {
            "total": sum(r.reads for r in reads),
            "by_actor_and_month": [
                {"actor": r.actor, "month": r.month, "reads": r.reads} for r in reads
            ],
        },
    }
    return lambda number: {**common, "file": number, **(first if number == 1 else {})}


def ledger_json(row: LedgerRow) -> dict[str, Any]:
    return {
        "id": row.id,
        "memory_id": row.memory_id,
        "actor": row.actor,
        "action": row.action,
        "reason": row.reason,
        "before": row.before,
        "after": row.after,
        "run_id": row.run_id,
        "at": row.created_at.isoformat(),
    }
