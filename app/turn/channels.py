"""What holds in the channel of a turn (mode, persona, a thread's parent): from this
process's cache, else the directory, else asked once of Discord (GET /channels/{id}) for a
channel the directory never placed, such as a thread whose THREAD_CREATE has not arrived."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from functools import partial

from app.db import unit_of_work
from app.directory import store as directory
from app.directory.store import DEFAULT, Known, Mode, Rules
from app.discord.errors import DiscordError
from app.frames.events import THREAD_TYPES, MessageCreate
from app.services import Services

log = logging.getLogger(__name__)


async def channel_rules(services: Services, message: MessageCreate, *, mentioned: bool) -> Rules:
    """A DM has no channel settings; a guild channel's come cached per process. Discord is
    asked about a channel the directory never placed only when it matters: the bot is
    mentioned there, or some channel has a mode a thread could inherit."""
    read = await _read(services, message, mentioned=mentioned)
    return read if isinstance(read, Rules) else await _placed(services, message, read)


@dataclass(frozen=True, slots=True)
class Placing:
    """The rules that hold in a channel the directory never placed until Discord says what it
    is, and the lookup to make (``place``: ask Discord, record the answer, return the rules).
    It can give a thread its parent's persona, model and pins, never stop the turn: no channel
    has its mode off."""

    meanwhile: Rules
    place: Callable[[], Awaitable[Rules]]


async def mention_rules(services: Services, message: MessageCreate) -> Rules | Placing:
    """``channel_rules`` for a message that mentions the bot, without waiting on Discord when
    the answer cannot change whether the bot answers (a mention is addressed in every mode
    but off): the turn's first questions need not wait for the lookup."""
    read = await _read(services, message, mentioned=True)
    if isinstance(read, Rules):
        return read
    if read.any_off:
        return await _placed(services, message, read)
    return Placing(read.found, partial(_placed, services, message, read))


@dataclass(frozen=True, slots=True)
class _Unplaced:
    here: Known | None
    found: Rules  # what holds until the channel is placed
    any_off: bool  # some channel's mode is off: a thread of it takes no turns


async def _read(
    services: Services, message: MessageCreate, *, mentioned: bool
) -> Rules | _Unplaced:
    if message.guild_id is None:
        return DEFAULT
    cache, channel_id = services.channel_rules, message.channel_id
    if (cached := await cache.peek(channel_id)) is not None:
        return cached
    async with services.sessions() as session:
        here, found = await directory.rules_for(session, channel_id)
        if here is not None and here.placed:
            await cache.put(channel_id, found)
            return found
        if not mentioned and not await directory.any_mode_set(session):
            return found  # nothing a parent could change for an unaddressed message
        any_off = mentioned and await directory.any_mode_set(session, Mode.OFF)
    return _Unplaced(here, found, any_off)


async def _placed(services: Services, message: MessageCreate, unplaced: _Unplaced) -> Rules:
    assert message.guild_id is not None  # a DM is never unplaced
    channel_id = message.channel_id
    found = await _place(services, unplaced.here, channel_id, message.guild_id) or unplaced.found
    await services.channel_rules.put(channel_id, found)
    return found


async def _place(
    services: Services, here: Known | None, channel_id: int, guild_id: int
) -> Rules | None:
    """Ask Discord what the channel is, record it, and say what holds there now; None when
    Discord would not say (asked again once this process's cached rules expire)."""
    try:
        channel = await services.discord.get_channel(channel_id)
    except DiscordError as exc:
        log.info("channel not looked up", extra={"error": type(exc).__name__})
        return None
    kind = channel.get("type")
    kind = kind if isinstance(kind, int) and not isinstance(kind, bool) else 0
    parent_text = str(channel.get("parent_id") or "")
    # A text channel's parent_id is its category: only a thread hangs under a channel.
    parent_id = int(parent_text) if kind in THREAD_TYPES and parent_text.isdigit() else None
    name, owner = channel.get("name"), str(channel.get("owner_id") or "")
    async with unit_of_work(services.sessions) as session:
        await directory.record_channel(
            session,
            channel_id,
            guild_id=guild_id,
            parent_id=parent_id,
            name=name if isinstance(name, str) else None,
            name_by=int(owner) if kind in THREAD_TYPES and owner.isdigit() else None,
            type_=kind,
        )
        parent = await directory.known(session, parent_id) if parent_id is not None else None
    own = here.own if here is not None else directory.Own()
    return directory.rules(channel_id, Known(channel_id, guild_id, parent_id, own), parent)
