"""Gateway dispatch frames shaped exactly like Discord's, for tests and benchmarks."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime
from typing import Any

GUILD_ID = 500
_ids = itertools.count(10**17)


def next_id() -> int:
    return next(_ids)


def message_create(
    *,
    content: str,
    author_id: int = 2001,
    author_name: str = "alice",
    channel_id: int = 300,
    guild_id: int | None = GUILD_ID,
    message_id: int | None = None,
    bot: bool = False,
    reply_to: dict[str, Any] | None = None,
    roles: list[int] | None = None,
    timestamp: datetime | None = None,
    reply_to_id: int | None = None,
    attachments: list[dict[str, Any]] | None = None,
    nick: str | None = None,
) -> dict[str, Any]:
    """``reply_to``: the quoted message (Discord's ``referenced_message``); ``reply_to_id``:
    a reply whose quote Discord left out (it does, for older or uncached messages);
    ``nick``: the author's nickname in the guild (their display name there)."""
    mid = message_id if message_id is not None else next_id()
    d: dict[str, Any] = {
        "id": str(mid),
        "type": 19 if reply_to else 0,
        "channel_id": str(channel_id),
        "author": {
            "id": str(author_id),
            "username": author_name,
            "global_name": author_name.title(),
            "discriminator": "0",
            "avatar": None,
            **({"bot": True} if bot else {}),
        },
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
        d["member"] = {"nick": nick, "roles": [str(r) for r in roles or []]}
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
    return {"op": 0, "t": "MESSAGE_CREATE", "s": 42, "d": d}


def reaction_add(
    *,
    message_id: int,
    user_id: int,
    emoji: str = "👍",
    emoji_id: int | None = None,
    channel_id: int = 300,
    message_author_id: int | None = None,
) -> dict[str, Any]:
    d: dict[str, Any] = {
        "user_id": str(user_id),
        "channel_id": str(channel_id),
        "message_id": str(message_id),
        "guild_id": str(GUILD_ID),
        "emoji": {"id": str(emoji_id) if emoji_id else None, "name": emoji},
        "burst": False,
        "type": 0,
    }
    if message_author_id is not None:
        d["message_author_id"] = str(message_author_id)
    return {"op": 0, "t": "MESSAGE_REACTION_ADD", "s": 43, "d": d}


def frame(t: str, d: dict[str, Any]) -> dict[str, Any]:
    return {"op": 0, "t": t, "s": 44, "d": d}
