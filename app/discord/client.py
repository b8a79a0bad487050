"""Async client for the Discord REST calls the bot makes: per-route rate-limit buckets, retries
with backoff, typed errors, idempotent (nonce-enforced) message posting, and an error budget:
a refused call (401, 403, 404) is never retried and, for a few minutes, not made again."""

from __future__ import annotations

import asyncio
import json
import logging
import re
import time
from collections import defaultdict
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

import httpx
from prometheus_client import Counter

from app.discord.errors import (
    ALREADY_ACKNOWLEDGED,
    DiscordError,
    DiscordRateLimited,
    DiscordUnavailable,
    error_for,
)
from app.discord.refusals import (
    REFUSAL_TTL_S,
    TOKEN_REFUSAL_TTL_S,
    LocalRefusals,
    Refusal,
    Refusals,
)
from app.discord.split import message_nonce, split_message

log = logging.getLogger(__name__)

USER_AGENT = "DiscordBot (https://github.com/companion-bot/companion-bot, 0.1)"
REQUEST_TIMEOUT = 10.0
# A typing call is cosmetic: one short attempt, never a retry that could outlive its purpose.
TYPING_TIMEOUT = 5.0
# Looking a message or a channel up runs inside a turn, before its reply: two short attempts.
LOOKUP_ATTEMPTS = 2
LOOKUP_TIMEOUT = 5.0
# A 429 asking for a longer pause than this fails the call instead of parking a worker.
MAX_RATE_LIMIT_WAIT = 60.0
ALLOWED_MENTIONS: dict[str, Any] = {"parse": ["users"], "replied_user": True}
# Discord's upload limit for a bot's message without a boosted guild: 10 MiB for all files.
MAX_UPLOAD_BYTES = 10 * 1024 * 1024
# An interaction's callback must reach Discord within three seconds of the interaction: two
# short attempts fit; a third would arrive too late to count.
CALLBACK_ATTEMPTS = 2
CALLBACK_TIMEOUT = 1.2
# An interaction's token answers it (edits, follow-ups) for fifteen minutes.
INTERACTION_TOKEN_S = 15 * 60
EPHEMERAL = 1 << 6  # message flag: only the person who gave the command sees it
# Nothing in an answer to one person pings anyone.
NO_MENTIONS: dict[str, Any] = {"parse": []}

DISCORD_REFUSED = Counter(
    "discord_refused_total",
    "Discord answers in the 4xx range (429 included), by route and status: Discord bans the "
    "IP after 10,000 invalid requests in ten minutes.",
    ["route", "status"],
)
DISCORD_SKIPPED = Counter(
    "discord_skipped_total",
    "Discord calls not made because the same call was refused moments ago, by route and status.",
    ["route", "status"],
)


@dataclass(frozen=True, slots=True)
class Attachment:
    """A file to upload with a message (multipart ``files[n]``)."""

    filename: str
    content: bytes
    content_type: str = "application/octet-stream"


Sleep = Callable[[float], Awaitable[None]]
Upload = Sequence[tuple[str, tuple[str, bytes, str]]]
Clock = Callable[[], float]

_CUSTOM_EMOJI_MARKUP = re.compile(r"<a?:(?P<name>\w+):(?P<id>\d+)>")
_CUSTOM_EMOJI = re.compile(r"(?:a:)?(?P<name>\w+):(?P<id>\d+)")


def emoji_path(emoji: str) -> str:
    """The path segment for a reaction: custom emoji as ``name:id``, unicode percent-encoded."""
    text = emoji.strip()
    match = _CUSTOM_EMOJI_MARKUP.fullmatch(text) or _CUSTOM_EMOJI.fullmatch(text)
    if match:
        return f"{match['name']}:{match['id']}"
    return quote(text, safe="")


def backoff_delay(attempt: int) -> float:
    """Pause after failed attempt ``attempt`` (1-based) on a 5xx or transport error."""
    return float(min(0.5 * 2 ** (attempt - 1), 8.0))


@dataclass(frozen=True)
class _Route:
    method: str
    template: str  # e.g. "/channels/{channel_id}/messages", used in errors and logs
    path: str  # the concrete, encoded path
    bucket: str  # method + template + major parameter: one rate-limit bucket
    person: int | None = None  # whose DM channel a call opens, when no channel is named
    # An interaction's routes: its token is in the path (never in a key or a log), and a
    # refusal there is about that interaction, never the bot's token or a channel.
    interaction: int | None = None

    @property
    def label(self) -> str:
        return f"{self.method} {self.template}"

    def refusal_key(self, status: int, code: int | None = None) -> str | None:
        """What a refusal with ``status`` says no to: the token (401), the route in this
        channel or for this person (403), the exact path (404); for an interaction, that
        interaction (gone, or already answered); None for other answers."""
        if self.interaction is not None:
            if status in (401, 404) or code == ALREADY_ACKNOWLEDGED:
                return f"{self.method} {self.template} {self.interaction}"
            return None
        if status == 401:
            return "token"
        if status == 403:
            return f"{self.bucket} {self.person or ''}"
        if status == 404:
            return f"{self.method} {self.path}"
        return None

    @property
    def refusal_keys(self) -> list[str]:
        keys = (self.refusal_key(status, ALREADY_ACKNOWLEDGED) for status in (401, 403, 404))
        return list(dict.fromkeys(key for key in keys if key))


def _route(
    method: str,
    template: str,
    path: str,
    channel_id: int | None = None,
    *,
    person: int | None = None,
) -> _Route:
    # The channel is Discord's "major parameter": each channel has its own buckets.
    return _Route(method, template, path, f"{method} {template} {channel_id or ''}", person)


def _interaction_route(method: str, template: str, path: str, interaction_id: int) -> _Route:
    # Each interaction's token is its own webhook: its own bucket.
    bucket = f"{method} {template} {interaction_id}"
    return _Route(method, template, path, bucket, interaction=interaction_id)


@dataclass(frozen=True, slots=True)
class InteractionWebhook:
    """What answers an interaction after its callback: its application's webhook and its
    token (valid fifteen minutes; never logged)."""

    application_id: int
    interaction_id: int
    token: str = field(repr=False)

    def route(self, method: str, suffix: str, *, query: str = "") -> _Route:
        template = "/webhooks/{webhook_id}/{webhook_token}" + suffix
        path = f"/webhooks/{self.application_id}/{quote(self.token, safe='')}{suffix}{query}"
        return _interaction_route(method, template, path, self.interaction_id)


class DiscordClient:
    """Calls Discord through ``http``; ``sleep`` and ``clock`` are injectable for tests."""

    def __init__(
        self,
        http: httpx.AsyncClient,
        *,
        token: str,
        api_base: str,
        max_attempts: int = 4,
        sleep: Sleep = asyncio.sleep,
        clock: Clock = time.monotonic,
        timeout: float = REQUEST_TIMEOUT,
        max_rate_limit_wait: float = MAX_RATE_LIMIT_WAIT,
        refusals: Refusals | None = None,
    ) -> None:
        if max_attempts < 1:
            raise ValueError("max_attempts must be at least 1")
        self._http = http
        self._token = token
        self._base = api_base.rstrip("/")
        self._max_attempts = max_attempts
        self._sleep = sleep
        self._clock = clock
        self._timeout = timeout
        self._max_wait = max_rate_limit_wait
        self._headers = {"Authorization": f"Bot {token}", "User-Agent": USER_AGENT}
        self._reset_at: dict[str, float] = {}  # bucket -> clock time its quota comes back
        self._global_until = 0.0
        self._locks: defaultdict[str, asyncio.Lock] = defaultdict(asyncio.Lock)
        self._dm_channels: dict[int, int] = {}
        self._refusals = refusals or LocalRefusals(clock)

    def __repr__(self) -> str:
        return f"DiscordClient(api_base={self._base!r})"

    async def get_me(self) -> dict[str, Any]:
        data: dict[str, Any] = await self._request(_route("GET", "/users/@me", "/users/@me"))
        return data

    async def get_gateway(self) -> dict[str, Any]:
        route = _route("GET", "/gateway/bot", "/gateway/bot")
        data: dict[str, Any] = await self._request(route)
        return data

    async def send_message(
        self, channel_id: int, content: str, *, nonce_key: str, reply_to: int | None = None
    ) -> list[int]:
        """Post ``content`` (split over 2000 characters) in order; return the message ids.

        Retrying with the same ``nonce_key`` returns the earlier messages instead of new ones.
        Blank content posts nothing and returns ``[]``."""
        template = "/channels/{channel_id}/messages"
        route = _route("POST", template, f"/channels/{channel_id}/messages", channel_id)
        ids: list[int] = []
        for index, part in enumerate(split_message(content)):
            body: dict[str, Any] = {
                "content": part,
                "allowed_mentions": ALLOWED_MENTIONS,
                "nonce": message_nonce(nonce_key, channel_id, index),
                "enforce_nonce": True,
            }
            if index == 0 and reply_to is not None:
                body["message_reference"] = {
                    "message_id": str(reply_to),
                    "fail_if_not_exists": False,
                }
            data = await self._request(route, body)
            ids.append(int(data["id"]))
        return ids

    async def add_reaction(self, channel_id: int, message_id: int, emoji: str) -> None:
        # All reactions in a channel share one bucket, whatever the message or emoji.
        template = "/channels/{channel_id}/messages/{message_id}/reactions/{emoji}/@me"
        path = f"/channels/{channel_id}/messages/{message_id}/reactions/{emoji_path(emoji)}/@me"
        await self._request(_route("PUT", template, path, channel_id))

    async def trigger_typing(self, channel_id: int) -> None:
        """Show "Bot is typing…" in the channel for about ten seconds (one attempt)."""
        template = "/channels/{channel_id}/typing"
        route = _route("POST", template, f"/channels/{channel_id}/typing", channel_id)
        await self._request(route, attempts=1, timeout_s=TYPING_TIMEOUT)

    async def get_message(self, channel_id: int, message_id: int) -> dict[str, Any]:
        """One message as Discord has it now. ``DiscordNotFound`` when it is gone,
        ``DiscordMissingAccess`` when the bot may not read the channel."""
        template = "/channels/{channel_id}/messages/{message_id}"
        path = f"/channels/{channel_id}/messages/{message_id}"
        route = _route("GET", template, path, channel_id)
        data: dict[str, Any] = await self._request(
            route, attempts=LOOKUP_ATTEMPTS, timeout_s=LOOKUP_TIMEOUT
        )
        return data

    async def get_channel(self, channel_id: int) -> dict[str, Any]:
        """The channel object (a thread's carries its ``parent_id``)."""
        route = _route("GET", "/channels/{channel_id}", f"/channels/{channel_id}", channel_id)
        data: dict[str, Any] = await self._request(
            route, attempts=LOOKUP_ATTEMPTS, timeout_s=LOOKUP_TIMEOUT
        )
        return data

    async def open_dm(self, user_id: int) -> int:
        """The DM channel with ``user_id`` (opened once, then remembered)."""
        if user_id not in self._dm_channels:
            route = _route("POST", "/users/@me/channels", "/users/@me/channels", person=user_id)
            data = await self._request(route, {"recipient_id": str(user_id)})
            self._dm_channels[user_id] = int(data["id"])
        return self._dm_channels[user_id]

    async def send_dm(
        self,
        user_id: int,
        content: str,
        *,
        nonce_key: str,
        files: Sequence[Attachment] = (),
    ) -> list[int]:
        """Raises ``DiscordDMClosed`` when the user does not accept DMs from the bot."""
        channel_id = await self.open_dm(user_id)
        if files:
            return [await self.send_files(channel_id, content, files, nonce_key=nonce_key)]
        return await self.send_message(channel_id, content, nonce_key=nonce_key)

    async def send_files(
        self, channel_id: int, content: str, files: Sequence[Attachment], *, nonce_key: str
    ) -> int:
        """One message (content up to 2000 characters) with files attached, once per nonce.
        The caller keeps the files within ``MAX_UPLOAD_BYTES`` together."""
        if len(content) > 2000:
            raise ValueError("a message with files carries at most 2000 characters")
        if sum(len(f.content) for f in files) > MAX_UPLOAD_BYTES:
            raise ValueError("files over Discord's upload limit")
        template = "/channels/{channel_id}/messages"
        route = _route("POST", template, f"/channels/{channel_id}/messages", channel_id)
        payload = {
            "content": content,
            "allowed_mentions": ALLOWED_MENTIONS,
            "nonce": message_nonce(nonce_key, channel_id, 0),
            "enforce_nonce": True,
            "attachments": [{"id": i, "filename": f.filename} for i, f in enumerate(files)],
        }
        upload = [
            (f"files[{i}]", (f.filename, f.content, f.content_type)) for i, f in enumerate(files)
        ]
        data = await self._request(route, payload, files=upload)
        return int(data["id"])

    # -- application commands and interactions -----------------------------------------------

    async def get_application(self) -> dict[str, Any]:
        """The bot's own application (its id is what commands are registered under)."""
        route = _route("GET", "/applications/@me", "/applications/@me")
        data: dict[str, Any] = await self._request(route)
        return data

    async def set_commands(
        self, application_id: int, commands: Sequence[dict[str, Any]], *, guild_id: int | None
    ) -> list[dict[str, Any]]:
        """Replace every command of the application (in one guild, or global) with these:
        a bulk overwrite, so doing it twice leaves one set."""
        if guild_id is None:
            template = "/applications/{application_id}/commands"
            path = f"/applications/{application_id}/commands"
        else:
            template = "/applications/{application_id}/guilds/{guild_id}/commands"
            path = f"/applications/{application_id}/guilds/{guild_id}/commands"
        data: list[dict[str, Any]] = await self._request(
            _route("PUT", template, path), list(commands)
        )
        return data

    async def respond(self, interaction_id: int, token: str, response: dict[str, Any]) -> None:
        """The interaction's one callback (a deferral, an answer, autocomplete choices):
        ``DiscordAlreadyAcknowledged`` when it was made already (Discord's 40060, or this
        client's memory of the first, shared by every worker), ``DiscordInteractionGone``
        when its three seconds passed."""
        template = "/interactions/{interaction_id}/{interaction_token}/callback"
        path = f"/interactions/{interaction_id}/{quote(token, safe='')}/callback"
        route = _interaction_route("POST", template, path, interaction_id)
        await self._request(route, response, attempts=CALLBACK_ATTEMPTS, timeout_s=CALLBACK_TIMEOUT)
        await self._remember_answered(route)

    async def edit_original(
        self, to: InteractionWebhook, content: str, *, files: Sequence[Attachment] = ()
    ) -> dict[str, Any]:
        """Replace the deferred answer with ``content`` (and ``files``); idempotent."""
        route = to.route("PATCH", "/messages/@original")
        body: dict[str, Any] = {"content": content, "allowed_mentions": NO_MENTIONS}
        data: dict[str, Any] = await self._send_with_files(route, body, files)
        return data

    async def follow_up(
        self,
        to: InteractionWebhook,
        content: str,
        *,
        number: int,
        files: Sequence[Attachment] = (),
    ) -> dict[str, Any] | None:
        """The ``number``-th follow-up answering the interaction, at most once: Discord takes
        no nonce here, so each number is claimed (across workers and retried jobs) before it
        is sent, and a send whose outcome is unknown (a 5xx, no response) is not repeated.
        None when that follow-up was sent, or tried, before."""
        key = f"followup:{to.interaction_id}:{number}"
        if not await self._refusals.claim(key, INTERACTION_TOKEN_S):
            log.info("interaction follow-up not sent again", extra={"number": number})
            return None
        route = to.route("POST", "", query="?wait=true")
        body = {"content": content, "allowed_mentions": NO_MENTIONS, "flags": EPHEMERAL}
        data: dict[str, Any] = await self._send_with_files(route, body, files, once=True)
        return data

    async def _send_with_files(
        self, route: _Route, body: dict[str, Any], files: Sequence[Attachment], once: bool = False
    ) -> Any:
        if len(str(body.get("content") or "")) > 2000:
            raise ValueError("an answer carries at most 2000 characters")
        if sum(len(f.content) for f in files) > MAX_UPLOAD_BYTES:
            raise ValueError("files over Discord's upload limit")
        if files:
            body = {
                **body,
                "attachments": [{"id": i, "filename": f.filename} for i, f in enumerate(files)],
            }
        upload = [
            (f"files[{i}]", (f.filename, f.content, f.content_type)) for i, f in enumerate(files)
        ]
        return await self._request(route, body, files=upload, once=once)

    async def _remember_answered(self, route: _Route) -> None:
        """The callback was made: a second one (another worker, a retried job) is refused at
        once, as Discord would refuse it, without asking."""
        key = route.refusal_key(400, ALREADY_ACKNOWLEDGED)
        assert key is not None
        answered = Refusal(400, ALREADY_ACKNOWLEDGED, "Interaction has already been acknowledged.")
        await self._refusals.remember(key, answered, INTERACTION_TOKEN_S)

    async def _request(
        self,
        route: _Route,
        body: dict[str, Any] | list[dict[str, Any]] | None = None,
        *,
        files: Upload = (),
        attempts: int | None = None,
        timeout_s: float | None = None,
        once: bool = False,
    ) -> Any:
        # One call at a time per bucket, so a quota or a refusal seen by one call holds for
        # the next. ``once``: a call that must not be repeated when Discord may have acted on
        # it (a 5xx, no response); only a 429, which Discord did not act on, is retried.
        max_attempts = attempts or self._max_attempts
        async with self._locks[route.bucket]:
            refused = await self._refusals.recall(route.refusal_keys)
            if refused is not None:
                DISCORD_SKIPPED.labels(route=route.label, status=str(refused.status)).inc()
                log.info("discord call skipped: refused moments ago", extra={"route": route.label})
                raise refused.error()
            failure: DiscordError | None = None
            for attempt in range(1, max_attempts + 1):
                await self._wait_for(route.bucket)
                outcome = await self._attempt(route, body, files, timeout_s)
                if isinstance(outcome, httpx.Response):
                    return outcome.json() if outcome.content else None
                failure = outcome
                if once and not isinstance(outcome, DiscordRateLimited):
                    break
                log.warning(
                    "discord call failed, retrying",
                    extra={"route": route.label, "status": outcome.status, "attempt": attempt},
                )
                # A 429 already set the bucket's (or the global) pause; others back off.
                if attempt < max_attempts and not isinstance(outcome, DiscordRateLimited):
                    await self._sleep(backoff_delay(attempt))
            assert failure is not None
            raise failure

    async def _attempt(
        self,
        route: _Route,
        body: dict[str, Any] | list[dict[str, Any]] | None,
        files: Upload = (),
        timeout_s: float | None = None,
    ) -> httpx.Response | DiscordError:
        """One HTTP call: the response on success, a retryable error, or raise a final one.

        With files the body goes as multipart: the JSON in ``payload_json``, then the files."""
        try:
            if files:
                response = await self._http.request(
                    route.method,
                    self._base + route.path,
                    data={"payload_json": json.dumps(body)},
                    files=list(files),
                    headers=self._headers,
                    timeout=timeout_s or self._timeout,
                )
            else:
                response = await self._http.request(
                    route.method,
                    self._base + route.path,
                    json=body,
                    headers=self._headers,
                    timeout=timeout_s or self._timeout,
                )
        except httpx.TransportError as exc:
            return DiscordUnavailable(f"{route.label}: no response ({type(exc).__name__})")
        self._note_quota(route.bucket, response)
        status = response.status_code
        if status < 400:
            return response
        code, text = _error_body(response)
        message = self._safe(f"{route.label} -> {status} ({code}): {text}")
        error = error_for(status, code, message)
        if status >= 500:
            return error
        DISCORD_REFUSED.labels(route=route.label, status=str(status)).inc()
        if status == 429:
            self._note_rate_limit(route.bucket, response, error)
            return error
        # Any other 4xx is final: never retried here, and a refusal is not asked again soon.
        key = route.refusal_key(status, code)
        if key is not None:
            ttl_s = TOKEN_REFUSAL_TTL_S if status == 401 else REFUSAL_TTL_S
            if route.interaction is not None:
                ttl_s = INTERACTION_TOKEN_S  # gone or answered: for the token's whole life
            await self._refusals.remember(key, Refusal(status, code, message), ttl_s)
        raise error

    async def _wait_for(self, bucket: str) -> None:
        wait = max(self._reset_at.pop(bucket, 0.0), self._global_until) - self._clock()
        if wait > 0:
            await self._sleep(wait)

    def _note_quota(self, bucket: str, response: httpx.Response) -> None:
        """Remember an exhausted bucket (``X-RateLimit-Remaining: 0``) until it resets."""
        if response.headers.get("x-ratelimit-remaining") != "0":
            return
        reset_after = _float(response.headers.get("x-ratelimit-reset-after"))
        if reset_after is not None:
            self._reset_at[bucket] = self._clock() + reset_after

    def _note_rate_limit(self, bucket: str, response: httpx.Response, error: DiscordError) -> None:
        data = _json(response)
        retry_after = _float(data.get("retry_after"))
        if retry_after is None:
            retry_after = _float(response.headers.get("retry-after")) or 1.0
        if retry_after > self._max_wait:
            raise error
        until = self._clock() + retry_after
        if data.get("global") is True or response.headers.get("x-ratelimit-global") == "true":
            self._global_until = max(self._global_until, until)
        else:
            self._reset_at[bucket] = until

    def _safe(self, text: str) -> str:
        return text.replace(self._token, "[token]") if self._token else text


def _json(response: httpx.Response) -> dict[str, Any]:
    try:
        data = response.json()
    except ValueError:
        return {}
    return data if isinstance(data, dict) else {}


def _error_body(response: httpx.Response) -> tuple[int | None, str]:
    """Discord's ``{"code": 50007, "message": "..."}``, tolerating proxies' HTML pages."""
    data = _json(response)
    code = data.get("code")
    message = data.get("message")
    return (
        code if isinstance(code, int) else None,
        message[:200] if isinstance(message, str) else response.reason_phrase,
    )


def _float(value: Any) -> float | None:
    try:
        return float(value) if value is not None else None
    except (TypeError, ValueError):
        return None
