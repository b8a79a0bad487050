"""A local fake of the Discord REST API for tests, benchmarks and offline development.

It speaks the wire format of the calls the bot makes (auth, message create with
``enforce_nonce``, reactions, DM channels, typing, fetching a message or a channel, JSON
error codes, 429 bodies and rate-limit headers), records every call in order, and takes
injected faults and delays. Every request is first held against Discord's published API
description (``app/discord/described.py``): one that does not fit gets Discord's own error
and is kept in ``misfits`` (and in ``MISFITS``, which the test suite checks after each
test). Serve ``FakeDiscord().app`` (e.g. with ``tests/support/servers.serve``) and point
``DISCORD_API_BASE`` at it. ``FakeCDN`` stands in for Discord's attachment CDN
(cdn.discordapp.com)."""

from __future__ import annotations

import asyncio
import email.policy
import itertools
import json
import logging
import math
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from email.parser import BytesParser
from pathlib import Path
from typing import Any
from urllib.parse import unquote

from fastapi import FastAPI, Request, Response
from fastapi.responses import JSONResponse

from app.discord.described import Description, Misfit
from app.discord.described import Request as Described
from app.discord.errors import (
    CANNOT_DM_USER,
    INVALID_FORM_BODY,
    MISSING_ACCESS,
    UNKNOWN_CHANNEL,
    UNKNOWN_MESSAGE,
)
from app.discord.fake_interactions import FakeInteractions

DISCORD_EPOCH_MS = 1_420_070_400_000
log = logging.getLogger(__name__)
# Every misfit of every fake in this process, in order: the test suite fails a test that
# leaves one here (tests/conftest.py); a test that sends one on purpose takes it back
# (``FakeDiscord.take_misfits``).
MISFITS: list[Misfit] = []
_MESSAGES = re.compile(r"/channels/(\d+)/messages")
_MESSAGE = re.compile(r"/channels/(\d+)/messages/(\d+)")
_CHANNEL = re.compile(r"/channels/(\d+)")
_TYPING = re.compile(r"/channels/(\d+)/typing")
_REACTION = re.compile(r"/channels/(\d+)/messages/(\d+)/reactions/([^/]+)/@me")


@dataclass(frozen=True)
class Call:
    """One request as received: ``path`` is the raw (still percent-encoded) path."""

    method: str
    path: str
    json: Any
    at: float  # time.monotonic() on arrival
    status: int  # the status the fake answered with


@dataclass(frozen=True)
class Reaction:
    channel_id: int
    message_id: int
    emoji: str  # decoded: "👍" or "name:id"


@dataclass
class Fault:
    """An injected failure for the next ``count`` calls matching ``target``."""

    target: str  # "POST /channels/5/messages" (method + path prefix) or "/channels/5" (any method)
    status: int
    retry_after: float | None = None
    code: int | None = None
    is_global: bool = False
    count: int = 1
    after: bool = False  # handle the call first, then fail (the response is "lost")

    def matches(self, method: str, path: str) -> bool:
        wanted_method, _, prefix = self.target.partition(" ")
        if not prefix:
            return path.startswith(wanted_method)
        return method == wanted_method.upper() and path.startswith(prefix)


@dataclass
class FakeDiscord:
    """State of the fake, all public for assertions.

    ``messages`` holds every message the bot created, as Discord returns them (string ids);
    ``reactions`` every (channel, message, emoji) reacted, once each; ``calls`` every request.
    Channels need no creating; put ids in ``missing_access`` (403 50001) or
    ``unknown_channels`` (404 10003) to make them fail, users in ``dm_closed`` to refuse DMs."""

    token: str = "fake-token"
    bot_user_id: int = 1000
    bot_username: str = "companion"
    gateway_url: str = "wss://gateway.discord.gg"
    missing_access: set[int] = field(default_factory=set)
    unknown_channels: set[int] = field(default_factory=set)
    dm_closed: set[int] = field(default_factory=set)
    # When true, reacting to or replying to an id the fake never saw gives 404 10008.
    strict_messages: bool = False
    messages: list[dict[str, Any]] = field(default_factory=list)
    reactions: list[Reaction] = field(default_factory=list)
    calls: list[Call] = field(default_factory=list)
    dm_channels: dict[int, int] = field(default_factory=dict)  # user id -> DM channel id
    uploads: dict[int, bytes] = field(default_factory=dict)  # attachment id -> its bytes
    faults: list[Fault] = field(default_factory=list)
    # Channel objects GET /channels/{id} answers with (add_channel, add_thread); any other id
    # is a plain text channel.
    channels: dict[int, dict[str, Any]] = field(default_factory=dict)
    delays: list[Fault] = field(default_factory=list)  # status unused: seconds in retry_after
    _exhausted: list[tuple[str, float]] = field(default_factory=list)
    # Called with ("message", message) for every message created, ("reaction", {...}) for
    # every new reaction, and ("dm_channel", {...}) when a DM channel is first opened: a
    # live view (the dev playground) follows the fake without polling its lists.
    listeners: list[Callable[[str, dict[str, Any]], None]] = field(default_factory=list)
    # Requests that did not fit Discord's API description (answered with Discord's error).
    misfits: list[Misfit] = field(default_factory=list)
    _known_ids: set[int] = field(default_factory=set)
    _last_id: int = 0
    # Application commands and interactions (app/discord/fake_interactions.py); the bot's
    # application id is its user id, as for every bot made since 2020.
    interactions: FakeInteractions = field(init=False)

    def __post_init__(self) -> None:
        self.interactions = FakeInteractions(self.bot_user_id, self._snowflake, self._notify)

    # -- set-up helpers ---------------------------------------------------------------------

    def fail_next(
        self,
        target: str,
        status: int,
        *,
        retry_after: float | None = None,
        code: int | None = None,
        count: int = 1,
        is_global: bool = False,
        after: bool = False,
    ) -> None:
        """Answer the next ``count`` calls matching ``target`` with ``status``.

        ``target`` is "METHOD /path-prefix" or just "/path-prefix". A 429 carries
        ``retry_after`` (seconds, default 1.0) in its JSON body and headers; ``is_global``
        makes it a global limit. With ``after`` the call takes effect first (a message is
        created) and only its response fails, as when a connection drops mid-reply."""
        if status == 429 and retry_after is None:
            retry_after = 1.0
        self.faults.append(Fault(target, status, retry_after, code, is_global, count, after))

    def exhaust_next(self, target: str, reset_after: float) -> None:
        """The next successful call matching ``target`` reports ``X-RateLimit-Remaining: 0``
        with ``X-RateLimit-Reset-After: reset_after``."""
        self._exhausted.append((target, reset_after))

    def delay_next(self, target: str, seconds: float, *, count: int = 1) -> None:
        """Answer the next ``count`` calls matching ``target`` only after ``seconds``."""
        self.delays.append(Fault(target, 0, retry_after=seconds, count=count))

    def seed_message(
        self,
        channel_id: int,
        content: str,
        *,
        author_id: int,
        username: str = "user",
        reply_to: int | None = None,
        guild_id: int | None = None,
    ) -> int:
        """Record a message a user wrote (so ``strict_messages`` knows it and GET finds it);
        return its id. ``reply_to`` makes it a reply to that message in the same channel."""
        reference = None
        if reply_to is not None:
            reference = {"message_id": str(reply_to), "channel_id": str(channel_id)}
            if guild_id is not None:
                reference["guild_id"] = str(guild_id)
        message = self._message(
            channel_id, content, author_id=author_id, username=username, reference=reference
        )
        return int(message["id"])

    def add_channel(self, channel_id: int, *, guild_id: int, name: str = "general") -> None:
        """A guild text channel, as GET /channels/{id} describes it."""
        self.channels[channel_id] = {
            "id": str(channel_id),
            "type": 0,
            "guild_id": str(guild_id),
            "name": name,
            "parent_id": None,
            "position": 0,
            "nsfw": False,
        }

    def add_thread(
        self,
        thread_id: int,
        *,
        parent_id: int,
        guild_id: int,
        name: str = "a thread",
        owner_id: int = 1,
    ) -> dict[str, Any]:
        """A public thread under ``parent_id`` that ``owner_id`` started; returns it (the
        THREAD_CREATE ``d`` too)."""
        thread = {
            "id": str(thread_id),
            "type": 11,
            "guild_id": str(guild_id),
            "parent_id": str(parent_id),
            "name": name,
            "owner_id": str(owner_id),
            "message_count": 0,
            "member_count": 1,
            "thread_metadata": {
                "archived": False,
                "auto_archive_duration": 1440,
                "locked": False,
                "create_timestamp": datetime.now(UTC).isoformat(),
            },
        }
        self.channels[thread_id] = thread
        return thread

    def clear(self) -> None:
        """Forget messages, reactions, calls and pending faults (keeps configuration)."""
        self.messages.clear()
        self.reactions.clear()
        self.calls.clear()
        self.faults.clear()
        self.delays.clear()
        self._exhausted.clear()
        self._known_ids.clear()

    # -- assertion helpers ------------------------------------------------------------------

    @property
    def posted(self) -> list[dict[str, Any]]:
        """Messages the bot posted, in order."""
        return [m for m in self.messages if m["author"]["id"] == str(self.bot_user_id)]

    def messages_in(self, channel_id: int) -> list[dict[str, Any]]:
        return [m for m in self.posted if m["channel_id"] == str(channel_id)]

    def texts_in(self, channel_id: int) -> list[str]:
        return [m["content"] for m in self.messages_in(channel_id)]

    def dms_to(self, user_id: int) -> list[dict[str, Any]]:
        channel_id = self.dm_channels.get(user_id)
        return [] if channel_id is None else self.messages_in(channel_id)

    def attachment(self, message: dict[str, Any], filename: str) -> bytes:
        """The bytes uploaded as ``filename`` with ``message``."""
        found = [a for a in message["attachments"] if a["filename"] == filename]
        if not found:
            raise KeyError(filename)
        return self.uploads[int(found[0]["id"])]

    def reactions_on(self, message_id: int) -> list[str]:
        return [r.emoji for r in self.reactions if r.message_id == message_id]

    def take_misfits(self) -> list[Misfit]:
        """This fake's misfits, taken back from ``MISFITS`` (for a test that sends them on
        purpose)."""
        mine, self.misfits = self.misfits, []
        for misfit in mine:
            if misfit in MISFITS:
                MISFITS.remove(misfit)
        return mine

    def calls_to(self, method: str, path_prefix: str = "/") -> list[Call]:
        return [c for c in self.calls if c.method == method and c.path.startswith(path_prefix)]

    def typing_in(self, channel_id: int) -> list[Call]:
        """Every typing call for ``channel_id``, in order (``at`` is when it arrived)."""
        return self.calls_to("POST", f"/channels/{channel_id}/typing")

    # -- the app ----------------------------------------------------------------------------

    @property
    def app(self) -> FastAPI:
        app = FastAPI()

        @app.api_route("/{rest:path}", methods=["GET", "POST", "PUT", "PATCH", "DELETE"])
        async def handle(request: Request) -> Response:
            body = await request.body()
            data: Any = None
            content_type = request.headers.get("content-type", "")
            if body and content_type.startswith("multipart/form-data"):
                data = _multipart(content_type, body)
            elif body:
                try:
                    data = await request.json()
                except ValueError:
                    data = None
            raw_path = request.scope.get("raw_path", b"").decode() or request.url.path
            arrived = time.monotonic()
            if (delay := self._take(self.delays, request.method, unquote(raw_path))) is not None:
                await asyncio.sleep(delay.retry_after or 0.0)
            described = Described(
                request.method, raw_path, dict(request.query_params), _as_sent(data), content_type
            )
            response = self._answer(request, unquote(raw_path), data, described)
            self.calls.append(Call(request.method, raw_path, data, arrived, response.status_code))
            return response

        return app

    def _answer(self, request: Request, path: str, data: Any, described: Described) -> Response:
        method = request.method
        if request.headers.get("authorization") != f"Bot {self.token}":
            return _error(401, 0, "401: Unauthorized")
        if (misfit := Description.shipped().check(described)) is not None:
            self._misfit(misfit)
            return JSONResponse(misfit.body, status_code=misfit.status)
        fault = self._take_fault(method, path)
        if fault is not None and not fault.after:
            return _fault_response(fault)
        response = self._route(method, path, data)
        if fault is not None:
            return _fault_response(fault)
        return self._with_quota(method, path, response)

    def _route(self, method: str, path: str, data: Any) -> Response:
        if (answered := self.interactions.route(method, path.split("/"), data)) is not None:
            return answered
        if method == "GET" and path == "/users/@me":
            return JSONResponse(self._bot_user())
        if method == "GET" and path == "/gateway/bot":
            return JSONResponse(self._gateway())
        if method == "POST" and path == "/users/@me/channels":
            return self._open_dm(data)
        if method == "POST" and (match := _MESSAGES.fullmatch(path)):
            return self._create_message(int(match[1]), data)
        if method == "PUT" and (match := _REACTION.fullmatch(path)):
            return self._react(int(match[1]), int(match[2]), match[3])
        if method == "POST" and (match := _TYPING.fullmatch(path)):
            return self._typing(int(match[1]))
        if method == "GET" and (match := _MESSAGE.fullmatch(path)):
            return self._get_message(int(match[1]), int(match[2]))
        if method == "GET" and (match := _CHANNEL.fullmatch(path)):
            return self._get_channel(int(match[1]))
        return _error(404, 0, "404: Not Found")

    def _misfit(self, misfit: Misfit) -> None:
        self.misfits.append(misfit)
        MISFITS.append(misfit)
        log.error("request does not fit Discord's API description", extra={"misfit": str(misfit)})
        self._notify("misfit", {"request": f"{misfit.method} {misfit.path}", "why": str(misfit)})

    def _take_fault(self, method: str, path: str) -> Fault | None:
        return self._take(self.faults, method, path)

    @staticmethod
    def _take(pending: list[Fault], method: str, path: str) -> Fault | None:
        for fault in pending:
            if fault.matches(method, path):
                fault.count -= 1
                if fault.count <= 0:
                    pending.remove(fault)
                return fault
        return None

    def _with_quota(self, method: str, path: str, response: Response) -> Response:
        response.headers["X-RateLimit-Limit"] = "5"
        response.headers["X-RateLimit-Remaining"] = "4"
        response.headers["X-RateLimit-Reset-After"] = "1.000"
        if response.status_code >= 400:
            return response
        for entry in self._exhausted:
            target, reset_after = entry
            if Fault(target, 0).matches(method, path):
                self._exhausted.remove(entry)
                response.headers["X-RateLimit-Remaining"] = "0"
                response.headers["X-RateLimit-Reset-After"] = f"{reset_after:.3f}"
                break
        return response

    def _channel_error(self, channel_id: int) -> Response | None:
        if channel_id in self.unknown_channels:
            return _error(404, UNKNOWN_CHANNEL, "Unknown Channel")
        if channel_id in self.missing_access:
            return _error(403, MISSING_ACCESS, "Missing Access")
        return None

    def _create_message(self, channel_id: int, data: Any) -> Response:
        if (failure := self._channel_error(channel_id)) is not None:
            return failure
        data = data if isinstance(data, dict) else {}
        content = data.get("content") or ""
        files: list[tuple[str, bytes]] = data.get(_FILES, [])
        if not content and not files:
            return _error(400, 50006, "Cannot send an empty message")
        if sum(len(raw) for _, raw in files) > UPLOAD_LIMIT:
            return _error(413, 40005, "Request entity too large")
        if len(content) > 2000:
            return _error(
                400,
                INVALID_FORM_BODY,
                "Invalid Form Body",
                errors={"content": {"_errors": [{"code": "BASE_TYPE_MAX_LENGTH"}]}},
            )
        recipient = next((u for u, c in self.dm_channels.items() if c == channel_id), None)
        if recipient in self.dm_closed:
            return _error(403, CANNOT_DM_USER, "Cannot send messages to this user")
        nonce = data.get("nonce")
        if data.get("enforce_nonce") and nonce is not None:
            for earlier in self.posted:
                if earlier["nonce"] == nonce:
                    return JSONResponse(earlier)
        reference = data.get("message_reference")
        if self._dangling(reference):
            if reference.get("fail_if_not_exists", True):
                return _error(400, INVALID_FORM_BODY, "Invalid Form Body")
            reference = None  # Discord posts it as a plain message instead
        message = self._message(
            channel_id,
            content,
            author_id=self.bot_user_id,
            username=self.bot_username,
            nonce=nonce,
            reference=reference,
            allowed_mentions=data.get("allowed_mentions"),
            files=files,
        )
        return JSONResponse(message)

    def _dangling(self, reference: Any) -> bool:
        """A reply to a message the fake never saw (only checked with ``strict_messages``)."""
        if not self.strict_messages or not isinstance(reference, dict):
            return False
        return int(reference.get("message_id", 0)) not in self._known_ids

    def _react(self, channel_id: int, message_id: int, emoji: str) -> Response:
        if (failure := self._channel_error(channel_id)) is not None:
            return failure
        if self.strict_messages and message_id not in self._known_ids:
            return _error(404, UNKNOWN_MESSAGE, "Unknown Message")
        reaction = Reaction(channel_id, message_id, unquote(emoji))
        if reaction not in self.reactions:
            self.reactions.append(reaction)
            self._notify(
                "reaction",
                {
                    "channel_id": str(channel_id),
                    "message_id": str(message_id),
                    "emoji": reaction.emoji,
                    "user_id": str(self.bot_user_id),
                },
            )
        return Response(status_code=204)

    def _typing(self, channel_id: int) -> Response:
        if (failure := self._channel_error(channel_id)) is not None:
            return failure
        # As the gateway's TYPING_START says it: who, where, since when (unix seconds).
        self._notify(
            "typing",
            {
                "channel_id": str(channel_id),
                "user_id": str(self.bot_user_id),
                "timestamp": int(time.time()),
            },
        )
        return Response(status_code=204)

    def _get_message(self, channel_id: int, message_id: int) -> Response:
        if (failure := self._channel_error(channel_id)) is not None:
            return failure
        for message in self.messages:
            if message["id"] == str(message_id) and message["channel_id"] == str(channel_id):
                return JSONResponse(message)
        return _error(404, UNKNOWN_MESSAGE, "Unknown Message")

    def _get_channel(self, channel_id: int) -> Response:
        """A channel added with add_channel/add_thread; any other id is a plain text channel
        (as everywhere in this fake, channels need no creating) unless made to fail."""
        if (failure := self._channel_error(channel_id)) is not None:
            return failure
        channel = self.channels.get(channel_id)
        if channel is None:
            channel = {
                "id": str(channel_id),
                "type": 0,
                "name": f"channel-{channel_id}",
                "parent_id": None,
                "position": 0,
            }
        return JSONResponse(channel)

    def _open_dm(self, data: Any) -> Response:
        user_id = int(data["recipient_id"]) if isinstance(data, dict) else 0
        if not user_id:
            return _error(400, INVALID_FORM_BODY, "Invalid Form Body")
        if user_id not in self.dm_channels:
            self.dm_channels[user_id] = self._snowflake()
            self._notify(
                "dm_channel",
                {"user_id": str(user_id), "channel_id": str(self.dm_channels[user_id])},
            )
        return JSONResponse(
            {
                "id": str(self.dm_channels[user_id]),
                "type": 1,
                "last_message_id": None,
                "recipients": [{"id": str(user_id), "username": f"user{user_id}"}],
            }
        )

    def _message(
        self,
        channel_id: int,
        content: str,
        *,
        author_id: int,
        username: str,
        nonce: Any = None,
        reference: dict[str, Any] | None = None,
        allowed_mentions: Any = None,
        files: list[tuple[str, bytes]] | None = None,
    ) -> dict[str, Any]:
        message_id = self._snowflake()
        attachments = []
        for filename, raw in files or []:
            attachment_id = self._snowflake()
            self.uploads[attachment_id] = raw
            attachments.append({"id": str(attachment_id), "filename": filename, "size": len(raw)})
        message: dict[str, Any] = {
            "id": str(message_id),
            "channel_id": str(channel_id),
            "type": 19 if reference else 0,
            "content": content,
            "author": {
                "id": str(author_id),
                "username": username,
                "bot": author_id == self.bot_user_id,
            },
            "timestamp": datetime.now(UTC).isoformat(),
            "nonce": nonce,
            "message_reference": reference,
            "allowed_mentions": allowed_mentions,
            "mentions": [],
            "attachments": attachments,
            "embeds": [],
            "pinned": False,
            "tts": False,
        }
        self.messages.append(message)
        self._known_ids.add(message_id)
        self._notify("message", message)
        return message

    def _notify(self, kind: str, data: dict[str, Any]) -> None:
        for listener in list(self.listeners):
            listener(kind, data)

    def _snowflake(self) -> int:
        """Increasing ids shaped like Discord's (milliseconds since 2015 in the high bits)."""
        stamp = (int(time.time() * 1000) - DISCORD_EPOCH_MS) << 22
        self._last_id = max(self._last_id + 1, stamp)
        return self._last_id

    def _bot_user(self) -> dict[str, Any]:
        return {
            "id": str(self.bot_user_id),
            "username": self.bot_username,
            "discriminator": "0",
            "global_name": None,
            "avatar": None,
            "bot": True,
            "flags": 0,
        }

    def _gateway(self) -> dict[str, Any]:
        return {
            "url": self.gateway_url,
            "shards": 1,
            "session_start_limit": {
                "total": 1000,
                "remaining": 999,
                "reset_after": 14_400_000,
                "max_concurrency": 1,
            },
        }


@dataclass
class FakeCDN:
    """Discord's attachment CDN: serves the files put in it at URLs shaped like
    ``/attachments/<channel>/<attachment>/<filename>?ex=…&is=…&hm=…``, answers a redirect where
    told, 404 for anything else, and records every request. Set ``base_url`` once served.
    With ``kept_in`` (a folder) the files also outlive a restart, as the playground's chat does."""

    base_url: str = ""
    files: dict[str, tuple[bytes, str]] = field(default_factory=dict)  # path -> bytes, type
    redirects: dict[str, str] = field(default_factory=dict)  # path -> Location
    requests: list[str] = field(default_factory=list)  # paths, in order
    kept_in: Path | None = None
    _ids: itertools.count[int] = field(default_factory=itertools.count)

    def put(self, filename: str, content: bytes, content_type: str, *, channel_id: int = 1) -> str:
        """Store a file; its path on the CDN (its attachment id shaped like a snowflake)."""
        stamp = (int(time.time() * 1000) - DISCORD_EPOCH_MS) << 22
        path = f"/attachments/{channel_id}/{stamp | (next(self._ids) & 0x3FFFFF)}/{filename}"
        self.files[path] = (content, content_type)
        if self.kept_in is not None:
            self._keep(self.kept_in, path, content, content_type)
        return path

    @staticmethod
    def _keep(folder: Path, path: str, content: bytes, content_type: str) -> None:
        folder.mkdir(mode=0o700, exist_ok=True)
        name = path.split("/")[3]  # the attachment id: digits only
        (folder / name).write_bytes(content)
        with (folder / "index.jsonl").open("a", encoding="utf-8") as index:
            index.write(json.dumps({"path": path, "file": name, "type": content_type}) + "\n")

    def _kept(self, path: str) -> tuple[bytes, str] | None:
        """A file put here before a restart (``kept_in``), else None."""
        index = self.kept_in / "index.jsonl" if self.kept_in is not None else None
        if index is None or not index.exists():
            return None
        for line in index.read_text(encoding="utf-8").splitlines():
            try:
                record = json.loads(line)
            except ValueError:
                continue  # a line torn by a crash
            stored = index.parent / str(record.get("file"))
            if record.get("path") == path and stored.is_file():
                return stored.read_bytes(), str(record.get("type"))
        return None

    def url(self, path: str) -> str:
        return f"{self.base_url}{path}?ex=6790a1b2&is=678f5032&hm=0f3a9c"

    def redirect(self, path: str, location: str) -> None:
        self.redirects[path] = location

    def attachment(
        self,
        filename: str,
        content: bytes,
        content_type: str | None,
        *,
        size: int | None = None,
        url: str | None = None,
    ) -> dict[str, Any]:
        """A Discord attachment object for a file put here now (``size`` and ``url`` as the
        message claims them, when they should differ from the truth)."""
        path = self.put(filename, content, content_type or "application/octet-stream")
        attachment: dict[str, Any] = {
            "id": path.split("/")[3],
            "filename": filename,
            "size": len(content) if size is None else size,
            "url": url or self.url(path),
            "proxy_url": url or self.url(path),
        }
        if content_type is not None:
            attachment["content_type"] = content_type
        return attachment

    def fetched(self, path_or_url: str) -> int:
        """How many times the file behind ``path_or_url`` was requested."""
        path = path_or_url.removeprefix(self.base_url).split("?", 1)[0]
        return self.requests.count(path)

    @property
    def app(self) -> FastAPI:
        app = FastAPI()

        @app.get("/attachments/{rest:path}")
        async def serve(request: Request) -> Response:
            path = request.url.path
            self.requests.append(path)
            if path in self.redirects:
                return Response(status_code=302, headers={"location": self.redirects[path]})
            found = self.files.get(path) or self._kept(path)
            if found is None:
                return Response(
                    "This content is no longer available.", 404, media_type="text/plain"
                )
            content, content_type = found
            return Response(content, media_type=content_type)

        return app


# Discord's upload limit for a bot's message (all files together), as the real API answers.
UPLOAD_LIMIT = 10 * 1024 * 1024
_FILES = "__files__"


def _multipart(content_type: str, body: bytes) -> dict[str, Any]:
    """A message create sent as multipart: ``payload_json`` plus ``files[n]`` parts."""
    parsed = BytesParser(policy=email.policy.HTTP).parsebytes(
        f"Content-Type: {content_type}\r\n\r\n".encode() + body
    )
    data: dict[str, Any] = {}
    files: list[tuple[str, bytes]] = []
    for part in parsed.iter_parts():
        name = part.get_param("name", header="content-disposition")
        raw = part.get_payload(decode=True)
        if not isinstance(raw, bytes):
            continue
        if name == "payload_json":
            data = json.loads(raw)
        elif isinstance(name, str) and name.startswith("files["):
            files.append((str(part.get_filename() or name), raw))
    data[_FILES] = files
    return data


def _as_sent(data: Any) -> Any:
    """The body as Discord reads it: for multipart, ``payload_json`` with each file part
    named beside it."""
    if not isinstance(data, dict) or _FILES not in data:
        return data
    files = {f"files[{n}]": name for n, (name, _) in enumerate(data[_FILES])}
    return {**{k: v for k, v in data.items() if k != _FILES}, **files}


def _error(status: int, code: int, message: str, **extra: Any) -> JSONResponse:
    return JSONResponse({"code": code, "message": message, **extra}, status_code=status)


def _fault_response(fault: Fault) -> Response:
    if fault.status == 429:
        retry_after = fault.retry_after or 1.0
        scope = "global" if fault.is_global else "user"
        headers = {"Retry-After": str(math.ceil(retry_after)), "X-RateLimit-Scope": scope}
        if fault.is_global:
            headers["X-RateLimit-Global"] = "true"
        else:
            headers["X-RateLimit-Remaining"] = "0"
            headers["X-RateLimit-Reset-After"] = f"{retry_after:.3f}"
        body = {
            "message": "You are being rate limited.",
            "retry_after": retry_after,
            "global": fault.is_global,
            "code": 0,
        }
        return JSONResponse(body, status_code=429, headers=headers)
    code = fault.code if fault.code is not None else 0
    return _error(fault.status, code, _default_message(fault.status, code))


def _default_message(status: int, code: int) -> str:
    known = {
        MISSING_ACCESS: "Missing Access",
        CANNOT_DM_USER: "Cannot send messages to this user",
        UNKNOWN_CHANNEL: "Unknown Channel",
        UNKNOWN_MESSAGE: "Unknown Message",
        50013: "Missing Permissions",
    }
    if code in known:
        return known[code]
    return {500: "500: Internal Server Error", 502: "502: Bad Gateway"}.get(
        status, f"{status}: Error"
    )
