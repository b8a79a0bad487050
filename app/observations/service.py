"""MEM-01: gateway events become observation rows, a cheap insert each and no model call,
when the learning rule allows one about the person (app/consent/service.py). The rows are
kept by app/observations/store.py."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from sqlalchemy.ext.asyncio import AsyncSession

from app.channel.store import message_authors
from app.consent.service import Learning
from app.frames.events import (
    EventType,
    MessageCreate,
    MessageUpdate,
    ReactionAdd,
    ReactionRemove,
    ReactionRemoveAll,
    ReactionRemoveEmoji,
)
from app.observations import store
from app.observations.store import UNKNOWN_USER, Kind


async def observe(
    session: AsyncSession,
    learning: Learning,
    *,
    event_id: str,
    channel_id: int,
    guild_id: int | None,
    user_id: int,
    kind: Kind | str,
    message_id: int | None,
    content: str,
) -> bool:
    """Insert one observation, when ``learning`` allows one about ``user_id`` (memory on,
    the person not paused); False when not, or when ``event_id`` was already observed."""
    if not await learning.allows(session, user_id):
        return False
    return await store.add(
        session,
        event_id=event_id,
        channel_id=channel_id,
        guild_id=guild_id,
        user_id=user_id,
        kind=kind,
        message_id=message_id,
        content=content,
    )


async def observe_message(
    session: AsyncSession, message: MessageCreate, event_id: str, learning: Learning
) -> bool:
    """A person's message. Bots (our own echo included) are not observed here."""
    if message.author.bot:
        return False
    return await observe(
        session,
        learning,
        event_id=event_id,
        channel_id=message.channel_id,
        guild_id=message.guild_id,
        user_id=message.author.id,
        kind=Kind.MESSAGE,
        message_id=message.id,
        content=message.content,
    )


async def observe_bot_message(
    session: AsyncSession,
    *,
    message_id: int,
    channel_id: int,
    guild_id: int | None,
    bot_user_id: int,
    content: str,
    event_id: str,
    learning: Learning,
) -> bool:
    """One posted part of the bot's answer (``event_id`` e.g. ``bot:<message_id>``)."""
    return await observe(
        session,
        learning,
        event_id=event_id,
        channel_id=channel_id,
        guild_id=guild_id,
        user_id=bot_user_id,
        kind=Kind.BOT_MESSAGE,
        message_id=message_id,
        content=content,
    )


async def observe_edit(
    session: AsyncSession, edit: MessageUpdate, event_id: str, learning: Learning
) -> bool:
    """An edit with new text; embed-only updates (no content) are not edits of anyone's words."""
    if edit.content is None:
        return False
    if edit.author is not None:
        user_id = edit.author.id
    else:
        user_id = (await message_authors(session, [edit.id])).get(edit.id, UNKNOWN_USER)
    return await observe(
        session,
        learning,
        event_id=event_id,
        channel_id=edit.channel_id,
        guild_id=edit.guild_id,
        user_id=user_id,
        kind=Kind.EDIT,
        message_id=edit.id,
        content=edit.content,
    )


async def observe_deletes(
    session: AsyncSession,
    channel_id: int,
    guild_id: int | None,
    ids: Sequence[int],
    event_id: str,
    learning: Learning,
    authors: Mapping[int, int] | None = None,
) -> int:
    """One row per deleted message, filed under its author (looked up when not given).

    Each row's event id is ``<event_id>:<message_id>`` so a bulk delete stays idempotent."""
    if not ids:
        return 0
    known = dict(authors) if authors is not None else await message_authors(session, ids)
    inserted = 0
    for message_id in dict.fromkeys(ids):
        inserted += await observe(
            session,
            learning,
            event_id=f"{event_id}:{message_id}",
            channel_id=channel_id,
            guild_id=guild_id,
            user_id=known.get(message_id, UNKNOWN_USER),
            kind=Kind.DELETE,
            message_id=message_id,
            content="",
        )
    return inserted


ReactionEvent = ReactionAdd | ReactionRemove | ReactionRemoveAll | ReactionRemoveEmoji


async def observe_reaction(
    session: AsyncSession,
    event_type: EventType,
    data: ReactionEvent,
    event_id: str,
    learning: Learning,
    *,
    bot_user_id: int | None = None,
) -> bool:
    """A reaction added, removed, or cleared. The bot's own reactions are echoes, not news.

    Clears name no actor, so they are filed under the reacted message's author."""
    match data:
        case ReactionAdd() | ReactionRemove():
            if bot_user_id is not None and data.user_id == bot_user_id:
                return False
            added = event_type is EventType.MESSAGE_REACTION_ADD
            kind, user_id = (Kind.REACTION_ADD if added else Kind.REACTION_REMOVE), data.user_id
            content = data.emoji.value
        case ReactionRemoveAll():
            kind, content = Kind.REACTION_CLEAR, ""
            user_id = await store.author_of(session, data.message_id)
        case ReactionRemoveEmoji():
            kind, content = Kind.REACTION_CLEAR_EMOJI, data.emoji.value
            user_id = await store.author_of(session, data.message_id)
    return await observe(
        session,
        learning,
        event_id=event_id,
        channel_id=data.channel_id,
        guild_id=data.guild_id,
        user_id=user_id,
        kind=kind,
        message_id=data.message_id,
        content=content,
    )
