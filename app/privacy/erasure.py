"""MEM-09 erasure (`!forgetme`, the admin erase): everything the bot holds from one person,
removed in one transaction through each table's owner, so that nothing of theirs remains.

Their memories, messages, DMs with the bot (both sides), observations, signals and step
records go; their events still waiting for a retry, or dead-lettered, never run or replay;
the bot's replies to them in guilds are blanked; every other text that names or quotes them
(others' messages and memories, episodes, diaries, style revisions, recorded frames, task
sessions, pins) is deleted or rewritten without them. The ledger keeps only THAT memories
were erased (redacted rows and one receipt with counts), never what. The person is left
paused: they asked to be forgotten."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession

from app.agent import session as agent_sessions
from app.channel import log as channel_log
from app.channel import signals
from app.channel.log import LoggedMessage
from app.inbound import inbox, steps
from app.memory import consent, runs, store
from app.memory.records import Why
from app.privacy.traces import Traces
from app.structured import episodes, observations, pins

ACTOR = "forgetme"
REASON = "!forgetme"
RECEIPT_REASON = "!forgetme receipt"
_MENTION = re.compile(r"<@!?\d+>")


@dataclass(frozen=True, slots=True)
class Receipt:
    """What one erasure removed or rewrote, per table: counts only."""

    memories: int = 0
    messages: int = 0
    dm_messages: int = 0
    replies_blanked: int = 0
    mentions_removed: int = 0
    observations: int = 0
    signals: int = 0
    episodes: int = 0
    ledger_rows_redacted: int = 0
    others_memories_rewritten: int = 0
    events_redacted: int = 0
    events_closed: int = 0
    step_records: int = 0
    diaries_blanked: int = 0
    style_revisions_reverted: int = 0
    agent_sessions: int = 0
    pins_rewritten: int = 0


def format_receipt(receipt: Receipt) -> str:
    """Pure: the channel answer. Counts only, so it reveals nothing that was erased."""

    def n(count: int, one: str, many: str) -> str:
        return f"{count} {one if count == 1 else many}"

    return (
        "Done: I erased what I had from you — "
        f"{n(receipt.memories, 'memory', 'memories')}, "
        f"{n(receipt.messages, 'message', 'messages')}, "
        f"{n(receipt.observations, 'observation', 'observations')}, "
        f"{n(receipt.signals, 'reaction/correction', 'reactions/corrections')} and "
        f"{n(receipt.episodes, 'channel summary', 'channel summaries')} mentioning you. "
        "My memory log keeps only that this erasure happened, not what was erased. "
        "I won't learn anything new about you from now on; `!memory resume` turns learning "
        "back on if you change your mind."
    )


# --- the erasure ---------------------------------------------------------------------------


def _their_words(messages: Iterable[LoggedMessage], own_event: str | None) -> list[str]:
    """What they wrote, as it may be quoted elsewhere: mentions stripped, commands left out
    (`!memory show` is not theirs to take out of anyone else's text)."""
    words = []
    for message in messages:
        text = _MENTION.sub("", message.content).strip()
        if str(message.id) != own_event and text and not text.startswith("!"):
            words.append(text)
    return words


async def erase_user(
    session: AsyncSession,
    user_id: int,
    *,
    names: Iterable[str | None],
    own_event: str | None = None,
) -> Receipt:
    """Erase ``user_id`` inside the caller's transaction, through each table's owner; the
    counts. ``own_event``: the `!forgetme` frame itself, which must still parse as that
    command if its job is retried (its names are taken out, its text kept)."""
    await store.lock_owners(session, [user_id])
    theirs = await channel_log.messages_by_author(session, user_id)
    corrections = await signals.corrections_by(session, user_id)
    erased = await store.erase_owner(session, user_id, Why(ACTOR, REASON))
    traces = Traces.of(
        user_id,
        [*names, *(m.author_name for m in theirs)],
        [*_their_words(theirs, own_event), *(m.content for m in erased.memories), *corrections],
    )
    receipt = Receipt(
        memories=len(erased.memories),
        ledger_rows_redacted=erased.ledger_rows_redacted,
        others_memories_rewritten=await store.scrub_others(
            session,
            user_id,
            Why(ACTOR, "!forgetme: another person named"),
            patterns=traces.like_patterns,
            found_in=traces.found_in,
            scrub=traces.scrub,
        ),
        **await _channel(session, traces, theirs),
        **await _background(session, traces, theirs, own_event),
    )
    await store.record_erasure(session, user_id, Why(ACTOR, RECEIPT_REASON), asdict(receipt))
    # They asked to be forgotten: learning about them again at once would contradict that.
    await consent.pause(session, user_id)
    return receipt


async def _channel(
    session: AsyncSession, traces: Traces, theirs: list[LoggedMessage]
) -> dict[str, int]:
    """The channel log: their messages, their DMs with the bot, the bot's replies to them,
    and everyone else's words about them."""
    ids = [m.id for m in theirs]
    dms = {m.channel_id for m in theirs if m.guild_id is None}
    replies = await channel_log.blank_replies_to(session, ids)
    gone_observations = (
        await observations.delete_by_user(session, traces.user_id)
        + await observations.delete_of_messages(session, replies)
        + await observations.delete_in_channels(session, dms)
        + await observations.scrub(session, traces.like_patterns, traces.scrub)
    )
    return {
        "messages": await channel_log.delete_by_author(session, traces.user_id),
        "dm_messages": await channel_log.delete_channels(session, dms),
        "replies_blanked": len(replies),
        "mentions_removed": await channel_log.scrub(session, traces.like_patterns, traces.scrub),
        "observations": gone_observations,
        "signals": await signals.delete_by_user(session, traces.user_id)
        + await signals.scrub(session, traces.like_patterns, traces.scrub),
    }


async def _background(
    session: AsyncSession, traces: Traces, theirs: list[LoggedMessage], own_event: str | None
) -> dict[str, int]:
    """Everything built from what they said: summaries, diaries, style, frames, records."""
    event_ids = [str(m.id) for m in theirs if str(m.id) != own_event]

    def frame(payload: Any) -> Any:
        return _scrub_frame(traces, payload, own_event)

    frames = [*traces.like_patterns, f'%"{traces.user_id}"%']
    return {
        "episodes": await episodes.delete_where(session, traces.found_in),
        "events_closed": await inbox.close_unfinished_of(session, traces.user_id, keep=own_event),
        "events_redacted": await inbox.scrub_events(session, frames, frame),
        "step_records": await steps.forget_events(session, event_ids)
        + await steps.scrub(session, traces.like_patterns, traces.scrub_json),
        "diaries_blanked": await runs.blank_diaries(session, traces.found_in),
        "style_revisions_reverted": await runs.delete_styles(session, traces.found_in),
        "agent_sessions": await agent_sessions.delete_mentioning(session, traces.found_in),
        "pins_rewritten": await pins.scrub(session, traces.like_patterns, traces.scrub),
    }


def _scrub_frame(traces: Traces, payload: Any, own_event: str | None) -> Any:
    """A recorded gateway frame without the person: their own message's text blanked (the
    `!forgetme` frame keeps its command), their names gone, quotes of them blanked."""
    if not isinstance(payload, dict) or not isinstance(payload.get("d"), dict):
        return traces.scrub_json(payload)
    data = dict(payload["d"])
    author = data.get("author") or {}
    if str(author.get("id")) == str(traces.user_id):
        if str(data.get("id")) != own_event and data.get("content"):
            data["content"] = ""
        if isinstance(data.get("member"), dict):
            data["member"] = {**data["member"], "nick": None}
    quoted = data.get("referenced_message")
    if isinstance(quoted, dict) and str((quoted.get("author") or {}).get("id")) == str(
        traces.user_id
    ):
        data["referenced_message"] = {**quoted, "content": ""}
    return traces.scrub_json({**payload, "d": data})
