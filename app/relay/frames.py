"""Pure decisions over gateway frames: which to forward, their channel lane, retry delays."""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode, urlsplit, urlunsplit

from app.frames.events import EventType

GATEWAY_VERSION = 10

# The dispatch types POST /webhook handles, from the webhook's own list (a pydantic-only
# module: the relay still loads no database code); nothing else is forwarded.
HANDLED_TYPES = frozenset(t.value for t in EventType)

GUILDS = 1 << 0
GUILD_MESSAGES = 1 << 9
GUILD_MESSAGE_REACTIONS = 1 << 10
DIRECT_MESSAGES = 1 << 12
DIRECT_MESSAGE_REACTIONS = 1 << 13
MESSAGE_CONTENT = 1 << 15
INTENTS = (
    GUILDS
    | GUILD_MESSAGES
    | GUILD_MESSAGE_REACTIONS
    | DIRECT_MESSAGES
    | DIRECT_MESSAGE_REACTIONS
    | MESSAGE_CONTENT
)

# Frames without a channel share one lane so they still keep their relative order.
NO_CHANNEL = "-"


@dataclass(frozen=True, slots=True)
class Frame:
    """A dispatch frame to forward: its exact bytes plus what logging and ordering need."""

    body: bytes
    t: str
    s: int | None
    event_id: str | None
    channel_key: str
    session: str | None = None  # the gateway session it came on: with s, its replay identity


def is_forwarded(payload: Mapping[str, Any]) -> bool:
    return payload.get("op") == 0 and payload.get("t") in HANDLED_TYPES


def channel_key(data: object) -> str:
    """A message's channel; a thread event's own id (a thread is the channel its messages
    arrive in, so its creation keeps its place before them)."""
    if isinstance(data, Mapping):
        channel = data.get("channel_id")
        if channel is None and "parent_id" in data:
            channel = data.get("id")
        if isinstance(channel, str | int) and not isinstance(channel, bool):
            return str(channel)
    return NO_CHANNEL


def event_id(data: object) -> str | None:
    """The id an operator would search for in the logs: the message's id."""
    if not isinstance(data, Mapping):
        return None
    for key in ("id", "message_id"):
        value = data.get(key)
        if isinstance(value, str | int) and not isinstance(value, bool):
            return str(value)
    ids = data.get("ids")
    if isinstance(ids, list) and ids:
        return ",".join(str(i) for i in ids[:5]) + ("…" if len(ids) > 5 else "")
    return None


def to_frame(payload: Mapping[str, Any], raw: str | bytes, session: str | None = None) -> Frame:
    body = raw.encode() if isinstance(raw, str) else raw
    seq = payload.get("s")
    data = payload.get("d")
    return Frame(
        body=body,
        t=str(payload.get("t")),
        s=seq if isinstance(seq, int) else None,
        event_id=event_id(data),
        channel_key=channel_key(data),
        session=session,
    )


def parse_payload(raw: str | bytes) -> dict[str, Any] | None:
    try:
        payload = json.loads(raw)
    except ValueError:
        return None
    return payload if isinstance(payload, dict) else None


def backoff_delay(
    attempt: int, base: float, cap: float, rand: Callable[[], float] = random.random
) -> float:
    """Exponential backoff with full jitter: uniform in [0, min(cap, base·2^attempt)]."""
    return rand() * min(cap, base * 2.0 ** min(attempt, 30))


def retry_after_seconds(header: str | None, cap: float) -> float | None:
    """Seconds from a numeric Retry-After header, capped; None when absent or not a number."""
    if header is None:
        return None
    try:
        seconds = float(header.strip())
    except ValueError:
        return None
    if seconds != seconds or seconds < 0:  # NaN or negative
        return None
    return min(seconds, cap)


def connect_url(base: str) -> str:
    """The gateway URL to open: plain JSON text frames (no transport compression)."""
    parts = urlsplit(base)
    query = urlencode({"v": GATEWAY_VERSION, "encoding": "json"})
    return urlunsplit((parts.scheme, parts.netloc, parts.path or "/", query, ""))
