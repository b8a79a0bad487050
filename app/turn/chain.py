"""The reply chain: the message a reply answers and up to four more hops of its own chain,
for the prompt, even when they are older than the last 20 messages.

Each hop comes from the channel log, or, when the log lacks it, once from Discord
(GET /channels/{id}/messages/{mid}); a fetched message is logged, so from then on it is a
context line like any other: edits and deletes apply to it, an erasure removes it. Origin
rules: a hop is followed only within the channel itself (and, in a thread, its parent
channel, where a thread's first message points), never into another channel or guild, so a
reply cannot pull text from a channel its readers may not see. A deleted message ends the
chain; a fetched message by someone who paused learning (erasure leaves them paused) is
neither logged nor shown; a 403/404 is skipped quietly and not asked again for a while."""

from __future__ import annotations

import logging
from dataclasses import dataclass

from pydantic import ValidationError

from app.channel import store as channel_log
from app.channel.store import LoggedMessage
from app.consent import store as consent
from app.db import unit_of_work
from app.directory.store import Rules
from app.discord.errors import DiscordError, DiscordMissingAccess, DiscordNotFound
from app.frames.events import FORWARD, MessageCreate
from app.services import Services
from app.turn.prompt import Quoted

log = logging.getLogger(__name__)

MAX_HOPS = 5  # the replied-to message and four more


@dataclass(frozen=True, slots=True)
class _Ref:
    message_id: int
    channel_id: int


async def reply_chain(services: Services, message: MessageCreate, rules: Rules) -> list[Quoted]:
    """The chain oldest first, ending with the message being answered; [] when the message
    is not a reply (or the replied-to message may not be shown)."""
    target = message.reply_to_id
    reference = message.message_reference
    if target is None or (reference is not None and reference.type == FORWARD):
        return []  # a forward carries its own snapshot; it answers nothing
    allowed = {message.channel_id} | ({rules.parent_id} if rules.parent_id else set())
    ref: _Ref | None = _Ref(target, message.reply_to_channel_id)
    hops: list[LoggedMessage] = []
    seen: set[int] = set()
    while ref is not None and len(hops) < MAX_HOPS and ref.message_id not in seen:
        seen.add(ref.message_id)
        if ref.channel_id not in allowed:
            break
        hop = await _hop(services, ref, message.guild_id)
        if hop is None:
            break
        hops.append(hop)
        ref = _Ref(hop.reply_to_id, hop.channel_id) if hop.reply_to_id else None
    return [_quoted(services, hop) for hop in reversed(hops)]


def _quoted(services: Services, hop: LoggedMessage) -> Quoted:
    yours = hop.author_id == services.bot_user_id
    return Quoted(hop.author_id, hop.author_name, yours, hop.content, hop.attachments)


async def _hop(services: Services, ref: _Ref, guild_id: int | None) -> LoggedMessage | None:
    async with services.sessions() as session:
        logged = await channel_log.get_message(session, ref.message_id)
    if logged is not None:
        same_place = logged.guild_id == guild_id and logged.channel_id == ref.channel_id
        return logged if same_place and not logged.deleted else None
    return await _fetch(services, ref, guild_id)


async def _fetch(services: Services, ref: _Ref, guild_id: int | None) -> LoggedMessage | None:
    """Ask Discord once; log what it gives (unless its author paused learning)."""
    if await services.missing_messages.peek(ref.message_id):
        return None
    try:
        data = await services.discord.get_message(ref.channel_id, ref.message_id)
        fetched = MessageCreate.model_validate({**data, "guild_id": guild_id})
    except (DiscordNotFound, DiscordMissingAccess) as exc:
        log.info("replied-to message not available", extra={"error": type(exc).__name__})
        await services.missing_messages.put(ref.message_id, True)
        return None
    except (DiscordError, ValidationError) as exc:
        log.warning("replied-to message not fetched", extra={"error": type(exc).__name__})
        return None
    if fetched.channel_id != ref.channel_id:
        return None
    async with unit_of_work(services.sessions) as session:
        if await consent.paused_since(session, fetched.author.id) is not None:
            return None
        await channel_log.log_message(session, fetched)
        return await channel_log.get_message(session, fetched.id)
