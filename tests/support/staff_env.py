"""Builders for the staff/erasure tests: a MESSAGE_CREATE as the gateway would send it."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from app.frames.events import MessageCreate

CHANNEL = 500
GUILD = 1


def frame_data(
    *,
    id: int,
    author_id: int,
    content: str,
    username: str = "user",
    nick: str | None = None,
    roles: Sequence[int] = (),
    channel_id: int = CHANNEL,
    reply_to: tuple[int, int, str] | None = None,
) -> dict[str, Any]:
    """The ``d`` of a MESSAGE_CREATE frame; ``reply_to`` = (message id, author id, content)."""
    data: dict[str, Any] = {
        "id": str(id),
        "channel_id": str(channel_id),
        "guild_id": str(GUILD),
        "author": {"id": str(author_id), "username": username},
        "member": {"nick": nick, "roles": [str(r) for r in roles]},
        "content": content,
        "timestamp": "2026-11-29T12:00:00+00:00",
    }
    if reply_to is not None:
        ref_id, ref_author, ref_content = reply_to
        data["message_reference"] = {"message_id": str(ref_id)}
        data["referenced_message"] = {
            "id": str(ref_id),
            "author": {"id": str(ref_author), "username": "someone"},
            "content": ref_content,
        }
    return data


def chat_message(**kwargs: Any) -> MessageCreate:
    return MessageCreate.model_validate(frame_data(**kwargs))
