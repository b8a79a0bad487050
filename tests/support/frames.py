"""Gateway dispatch frames shaped exactly like Discord's, for tests and benchmarks: the one
place that knows what a MESSAGE_CREATE, an edit, a delete, a reaction or a thread looks like."""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from app.frames.events import MessageCreate

Frame = dict[str, Any]

GUILD_ID = 500
CHANNEL_ID = 300
_ids = itertools.count(10**17)


def next_id() -> int:
    return next(_ids)


def frame(t: str, d: dict[str, Any], *, s: int = 44) -> Frame:
    """A dispatch (op 0) of type ``t``; ``s`` is the gateway sequence."""
    return {"op": 0, "t": t, "s": s, "d": d}


def message_create(
    *,
    content: str,
    author_id: int = 2001,
    author_name: str = "alice",
    global_name: str | None = None,
    nick: str | None = None,
    channel_id: int = CHANNEL_ID,
    guild_id: int | None = GUILD_ID,
    message_id: int | None = None,
    bot: bool = False,
    reply_to: dict[str, Any] | None = None,
    roles: Sequence[int] = (),
    timestamp: datetime | None = None,
    reply_to_id: int | None = None,
    attachments: list[dict[str, Any]] | None = None,
) -> Frame:
    """``reply_to``: the quoted message (Discord's ``referenced_message``, e.g. another
    frame's ``d``); ``reply_to_id``: a reply whose quote Discord left out (it does, for
    older or uncached messages). ``global_name`` is the author's display name (the
    username, titled, unless given); ``nick`` and ``roles`` are the guild member's."""
    mid = message_id if message_id is not None else next_id()
    d: dict[str, Any] = {
        "id": str(mid),
        "type": 19 if reply_to else 0,
        "channel_id": str(channel_id),
        "author": _user(author_id, author_name, global_name, bot=bot),
        "content": content,
        "timestamp": (timestamp or datetime.now(UTC)).isoformat(),
        "edited_timestamp": None,
        "tts": False,
        "mention_everyone": False,
        "mentions": [],
        "mention_roles": [],
        "attachments": attachments or [],
        "embeds": [],
        "pinned": False,
        "nonce": str(mid),
    }
    if guild_id is not None:
        d["guild_id"] = str(guild_id)
        d["member"] = {"nick": nick, "roles": [str(r) for r in roles]}
    if reply_to is not None:
        d["message_reference"] = {
            "message_id": reply_to["id"],
            "channel_id": str(channel_id),
            "type": 0,
        }
        d["referenced_message"] = reply_to
    elif reply_to_id is not None:
        d["type"] = 19
        d["message_reference"] = {"message_id": str(reply_to_id), "channel_id": str(channel_id)}
    return frame("MESSAGE_CREATE", d, s=42)


def message_update(
    *,
    message_id: int,
    content: str | None,
    channel_id: int = CHANNEL_ID,
    guild_id: int | None = GUILD_ID,
    author_id: int | None = 2001,
    author_name: str = "alice",
    edited_at: datetime | None = None,
) -> Frame:
    """An edit (a partial message, as Discord sends it). ``author_id`` None: Discord left
    the author out, as it may; ``content`` None: an embed-only update, which is no edit."""
    d: dict[str, Any] = {"id": str(message_id), "channel_id": str(channel_id)}
    if guild_id is not None:
        d["guild_id"] = str(guild_id)
    if author_id is not None:
        d["author"] = _user(author_id, author_name, None)
    if content is not None:
        d["content"] = content
        d["edited_timestamp"] = (edited_at or datetime.now(UTC)).isoformat()
    return frame("MESSAGE_UPDATE", d)


def message_delete(
    *, message_id: int, channel_id: int = CHANNEL_ID, guild_id: int | None = GUILD_ID
) -> Frame:
    return frame("MESSAGE_DELETE", _where(channel_id, guild_id, id=str(message_id)))


def message_delete_bulk(
    *, message_ids: Sequence[int], channel_id: int = CHANNEL_ID, guild_id: int | None = GUILD_ID
) -> Frame:
    ids = [str(i) for i in message_ids]
    return frame("MESSAGE_DELETE_BULK", _where(channel_id, guild_id, ids=ids))


def reaction_add(
    *,
    message_id: int,
    user_id: int,
    emoji: str = "👍",
    emoji_id: int | None = None,
    channel_id: int = CHANNEL_ID,
    guild_id: int | None = GUILD_ID,
    message_author_id: int | None = None,
) -> Frame:
    d = _reaction(message_id, channel_id, guild_id, emoji, emoji_id, user_id=str(user_id))
    d |= {"burst": False, "type": 0}
    if message_author_id is not None:
        d["message_author_id"] = str(message_author_id)
    return frame("MESSAGE_REACTION_ADD", d, s=43)


def reaction_remove(
    *,
    message_id: int,
    user_id: int,
    emoji: str = "👍",
    emoji_id: int | None = None,
    channel_id: int = CHANNEL_ID,
    guild_id: int | None = GUILD_ID,
) -> Frame:
    d = _reaction(message_id, channel_id, guild_id, emoji, emoji_id, user_id=str(user_id))
    return frame("MESSAGE_REACTION_REMOVE", d | {"burst": False, "type": 0})


def reaction_remove_emoji(
    *,
    message_id: int,
    emoji: str,
    emoji_id: int | None = None,
    channel_id: int = CHANNEL_ID,
    guild_id: int | None = GUILD_ID,
) -> Frame:
    d = _reaction(message_id, channel_id, guild_id, emoji, emoji_id)
    return frame("MESSAGE_REACTION_REMOVE_EMOJI", d)


def reaction_remove_all(
    *, message_id: int, channel_id: int = CHANNEL_ID, guild_id: int | None = GUILD_ID
) -> Frame:
    d = _where(channel_id, guild_id, message_id=str(message_id))
    return frame("MESSAGE_REACTION_REMOVE_ALL", d)


def thread_create(
    *,
    thread_id: int,
    parent_id: int,
    name: str = "side talk",
    guild_id: int = GUILD_ID,
    t: str = "THREAD_CREATE",
    owner_id: int = 2001,
) -> Frame:
    """A public thread under ``parent_id`` that ``owner_id`` started; ``t="THREAD_UPDATE"``
    for a change to it."""
    d = {
        "id": str(thread_id),
        "guild_id": str(guild_id),
        "parent_id": str(parent_id),
        "name": name,
        "type": 11,
        "owner_id": str(owner_id),
    }
    if t == "THREAD_CREATE":
        d["newly_created"] = True
    return frame(t, d)


def parsed_message(message: Frame) -> MessageCreate:
    """A MESSAGE_CREATE frame's message as the webhook parses it."""
    assert message["t"] == "MESSAGE_CREATE", message["t"]
    return MessageCreate.model_validate(message["d"])


def _user(user_id: int, name: str, global_name: str | None, *, bot: bool = False) -> dict[str, Any]:
    return {
        "id": str(user_id),
        "username": name,
        "global_name": global_name or name.title(),
        "discriminator": "0",
        "avatar": None,
        **({"bot": True} if bot else {}),
    }


def _where(channel_id: int, guild_id: int | None, **fields: Any) -> dict[str, Any]:
    d: dict[str, Any] = {**fields, "channel_id": str(channel_id)}
    if guild_id is not None:
        d["guild_id"] = str(guild_id)
    return d


def _reaction(
    message_id: int,
    channel_id: int,
    guild_id: int | None,
    emoji: str,
    emoji_id: int | None,
    **fields: Any,
) -> dict[str, Any]:
    emoji_d = {"id": str(emoji_id) if emoji_id else None, "name": emoji}
    return _where(channel_id, guild_id, **fields, message_id=str(message_id), emoji=emoji_d)


def interaction_create(
    *,
    command: str = "memory",
    user_id: int = 2001,
    channel_id: int = CHANNEL_ID,
    guild_id: int | None = GUILD_ID,
    interaction_id: int | None = None,
) -> Frame:
    """A slash command as the gateway sends it (its token made up: no fake Discord knows it)."""
    d: dict[str, Any] = {
        "id": str(interaction_id or next_id()),
        "application_id": "1000",
        "type": 2,
        "token": "a-made-up-interaction-token",
        "version": 1,
        "data": {"id": "1", "name": command, "type": 1, "options": []},
        **_where(channel_id, guild_id),
    }
    user = _user(user_id, "alice", None)
    d.update({"member": {"user": user, "roles": []}} if guild_id is not None else {"user": user})
    return frame("INTERACTION_CREATE", d)
