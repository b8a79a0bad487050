"""The playground that stands in for Discord, served by the dev API only (never by
`uvicorn app.main:app`): a page, its config, and a live feed of what happens.

The page posts real gateway dispatch frames to ``/webhook``. The feed carries every frame the
webhook accepted and everything the bot did through the fake Discord REST API (messages,
reactions, DMs, typing), as server-sent events, so every open tab shows the same guild. Files
a person attaches are uploaded to the fake CDN first, and the message names them as Discord
does; the bot fetches them from there as it would from cdn.discordapp.com."""

from __future__ import annotations

import asyncio
import hmac
import itertools
import json
import secrets
from collections import deque
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any
from urllib.parse import unquote

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response, StreamingResponse
from starlette.routing import Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.discord.fake import FakeCDN, FakeDiscord

DISCORD_PREFIX = "/_discord/api/v10"
CDN_PREFIX = "/_discord/cdn"
MAX_UPLOAD_BYTES = 10 * 1024 * 1024  # Discord's per-message upload limit
FEED_SIZE = 2000
KEEPALIVE_S = 15.0
MAX_TEED_BODY = 1024 * 1024
LOCAL_HOSTS = frozenset({"127.0.0.1", "localhost", "[::1]"})
SESSION_COOKIE = "playground_session"
TOKEN_HEADER = "x-playground-token"
SIGN_IN = (
    "open the link `python -m app dev` printed on its console (it works once, in one "
    "browser); restart the stack for a new one"
)


@dataclass(frozen=True)
class Person:
    id: int
    name: str
    staff: bool = False


@dataclass(frozen=True)
class World:
    """The guild, channels and people of the playground; ids shaped like Discord's."""

    bot_id: int = 1_100_000_000_000_000_100
    bot_name: str = "companion"
    guild_id: int = 1_100_000_000_000_000_001
    guild_name: str = "Playground"
    channels: tuple[tuple[int, str], ...] = (
        (1_100_000_000_000_000_011, "general"),
        (1_100_000_000_000_000_012, "random"),
    )
    people: tuple[Person, ...] = (
        Person(1_100_000_000_000_000_201, "Alice"),
        Person(1_100_000_000_000_000_202, "Bob"),
        Person(1_100_000_000_000_000_203, "Sam", staff=True),
    )

    @property
    def staff_ids(self) -> list[int]:
        return [p.id for p in self.people if p.staff]

    def dm_channel(self, person: Person) -> int:
        """Each person's DM channel with the bot, fixed so the page knows it in advance."""
        return person.id + 100


# --- the live feed -----------------------------------------------------------------------


@dataclass
class Feed:
    """A bounded history of events and the open subscriptions to it; with ``kept_in``, the
    history (less the typing indicators) is also a file, so the chat outlives a restart."""

    history: deque[tuple[int, str]] = field(default_factory=lambda: deque(maxlen=FEED_SIZE))
    subscribers: set[asyncio.Queue[tuple[int, str] | None]] = field(default_factory=set)
    kept_in: Path | None = None
    _ids: itertools.count[int] = field(default_factory=lambda: itertools.count(1))

    def __post_init__(self) -> None:
        if self.kept_in is None:
            return
        self.history.extend(_kept_history(self.kept_in))
        # Rewritten at start: the file never holds more than the history it restores.
        self.kept_in.write_text("".join(_kept_line(e) for e in self.history), encoding="utf-8")
        self.kept_in.chmod(0o600)
        self._ids = itertools.count(self.history[-1][0] + 1 if self.history else 1)

    def publish(self, kind: str, data: dict[str, Any]) -> None:
        entry = (next(self._ids), json.dumps({"kind": kind, "data": data}, ensure_ascii=False))
        self.history.append(entry)
        if self.kept_in is not None and kind != "typing":
            with self.kept_in.open("a", encoding="utf-8") as kept:
                kept.write(_kept_line(entry))
        for queue in self.subscribers:
            queue.put_nowait(entry)

    def on_discord(self, kind: str, data: dict[str, Any]) -> None:
        """FakeDiscord's listener: what the bot did."""
        self.publish(kind, data)

    def close(self) -> None:
        """End every subscription (the server is stopping)."""
        for queue in self.subscribers:
            queue.put_nowait(None)

    async def follow(self, after: int) -> AsyncIterator[str]:
        """Server-sent events: history after ``after``, then live ones, with keep-alives."""
        queue: asyncio.Queue[tuple[int, str] | None] = asyncio.Queue()
        self.subscribers.add(queue)
        try:
            for past in [e for e in self.history if e[0] > after]:
                yield _event(past)
            while True:
                try:
                    live = await asyncio.wait_for(queue.get(), KEEPALIVE_S)
                except TimeoutError:
                    yield ": keep-alive\n\n"
                    continue
                if live is None:
                    return
                if live[0] > after:
                    yield _event(live)
        finally:
            self.subscribers.discard(queue)


def _kept_line(entry: tuple[int, str]) -> str:
    return json.dumps({"id": entry[0], "event": entry[1]}, ensure_ascii=False) + "\n"


def _kept_history(path: Path) -> list[tuple[int, str]]:
    """The newest FEED_SIZE events kept in ``path``; a torn or foreign line is skipped."""
    if not path.exists():
        return []
    kept: deque[tuple[int, str]] = deque(maxlen=FEED_SIZE)
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            record = json.loads(line)
            kept.append((int(record["id"]), str(record["event"])))
        except (ValueError, KeyError, TypeError):
            continue
    return list(kept)


def _event(entry: tuple[int, str]) -> str:
    return f"id: {entry[0]}\ndata: {entry[1]}\n\n"


def accepted_frame(body: bytes, answer: bytes) -> dict[str, Any] | None:
    """The frame of a webhook call answered ``{"status": "ok"}`` (a first delivery), else
    None: duplicates, ignored types and refusals never reach the feed."""
    try:
        status = json.loads(answer).get("status")
        frame = json.loads(body)
    except (ValueError, AttributeError):
        return None
    if status != "ok" or not isinstance(frame, dict) or not isinstance(frame.get("d"), dict):
        return None
    return {"t": frame.get("t"), "d": frame["d"]}


# --- the front door ----------------------------------------------------------------------


class DevFront:
    """The dev API's ASGI entry: the playground and the fake Discord beside the real app.

    Requests to ``/playground…`` and to the fake Discord never reach the bot's app; a POST to
    ``/webhook`` goes through unchanged and, once answered ``ok``, its frame joins the feed."""

    def __init__(
        self,
        api: ASGIApp,
        *,
        discord: ASGIApp,
        playground: ASGIApp,
        feed: Feed,
        cdn: ASGIApp | None = None,
    ):
        self.api, self.discord, self.playground, self.feed = api, discord, playground, feed
        self.cdn = cdn

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.api(scope, receive, send)  # lifespan: the bot's app starts and stops
            return
        path: str = scope["path"]
        if path.startswith(DISCORD_PREFIX + "/"):
            await self.discord(_strip(scope, DISCORD_PREFIX), receive, send)
        elif self.cdn is not None and path.startswith(CDN_PREFIX + "/"):
            await self.cdn(_strip(scope, CDN_PREFIX), receive, send)
        elif path == "/" or path == "/playground" or path.startswith("/playground/"):
            await self.playground(scope, receive, send)
        elif path == "/webhook" and scope.get("method") == "POST":
            await self._tee_webhook(scope, receive, send)
        else:
            await self.api(scope, receive, send)

    async def _tee_webhook(self, scope: Scope, receive: Receive, send: Send) -> None:
        body, answer, status = bytearray(), bytearray(), 0

        async def tee_receive() -> Message:
            message = await receive()
            if message["type"] == "http.request" and len(body) <= MAX_TEED_BODY:
                body.extend(message.get("body", b""))
            return message

        async def tee_send(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            elif message["type"] == "http.response.body":
                answer.extend(message.get("body", b""))
            await send(message)

        await self.api(scope, tee_receive, tee_send)
        if status == 200 and (frame := accepted_frame(bytes(body), bytes(answer))) is not None:
            self.feed.publish("frame", frame)


def _strip(scope: Scope, prefix: str) -> Scope:
    """The scope as the fake sees it when served at its own root (it reads ``raw_path``)."""
    raw: bytes = scope.get("raw_path") or scope["path"].encode()
    return {
        **scope,
        "path": scope["path"][len(prefix) :],
        "raw_path": raw[len(prefix) :] if raw.startswith(prefix.encode()) else raw,
        "root_path": "",
    }


# --- the page and its config -----------------------------------------------------------


@dataclass(frozen=True)
class PageConfig:
    """What the page needs: the tokens it sends (it stands in for the relay and for an
    operator), the world, and which models answer."""

    world: World
    gateway_token: str
    admin_secret: str
    models: str  # "demo", "anthropic" or "openai"
    models_note: str

    def as_json(self) -> dict[str, Any]:
        world = self.world
        return {
            "gatewayToken": self.gateway_token,
            "adminSecret": self.admin_secret,
            "models": self.models,
            "modelsNote": self.models_note,
            "bot": {"id": str(world.bot_id), "name": world.bot_name},
            "guild": {
                "id": str(world.guild_id),
                "name": world.guild_name,
                "channels": [{"id": str(cid), "name": name} for cid, name in world.channels],
            },
            "people": [
                {
                    "id": str(p.id),
                    "name": p.name,
                    "staff": p.staff,
                    "dmChannel": str(world.dm_channel(p)),
                }
                for p in world.people
            ],
        }


class Access:
    """Who may use the page: its config holds the admin secret and the gateway token, and its
    feed everything said, so not any process of this machine that can reach 127.0.0.1.

    The console prints a link with a random token; the first config request carrying that
    token gets a session, kept in an HttpOnly, SameSite=Strict cookie, and the token is
    spent. Every later request of the page (a reload, the feed, an upload) needs the cookie.
    Both live in this process only: a restart prints a new link."""

    def __init__(self, token: str | None = None) -> None:
        self.token = token or secrets.token_urlsafe(32)
        self._session: str | None = None

    def admits(self, request: Request) -> bool:
        cookie = request.cookies.get(SESSION_COOKIE, "")
        return self._session is not None and hmac.compare_digest(cookie, self._session)

    def redeem(self, offered: str) -> str | None:
        """The new session for the link's token, the first time it is offered; else None."""
        if self._session is not None or not hmac.compare_digest(offered, self.token):
            return None
        self._session = secrets.token_urlsafe(32)
        return self._session


def _local_only(request: Request) -> Response | None:
    """The page hands out the dev tokens: answer only requests addressed to this machine by
    name, so a web page that rebinds its own host name to 127.0.0.1 gets nothing."""
    host = (request.headers.get("host") or "").lower()
    name = host.rsplit(":", 1)[0] if not host.endswith("]") else host
    if name not in LOCAL_HOSTS:
        return JSONResponse({"detail": "the playground answers on 127.0.0.1 only"}, 403)
    return None


_ASSETS = {
    "/playground": ("playground.html", "text/html; charset=utf-8"),
    "/playground/": ("playground.html", "text/html; charset=utf-8"),
    "/playground/app.js": ("playground.js", "text/javascript; charset=utf-8"),
    "/playground/app.css": ("playground.css", "text/css; charset=utf-8"),
    "/playground/slash.js": ("slash.js", "text/javascript; charset=utf-8"),
    "/playground/slash.css": ("slash.css", "text/css; charset=utf-8"),
}


def _asset(name: str) -> bytes:
    return resources.files("app.dev").joinpath("static", name).read_bytes()


async def _upload(request: Request, cdn: FakeCDN) -> Response:
    """A file the page attaches: stored on the fake CDN, described as Discord describes an
    attachment (the page puts that object in its MESSAGE_CREATE)."""
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > MAX_UPLOAD_BYTES:
        return JSONResponse({"detail": "a file is at most 10 MB here"}, 413)
    content = await request.body()
    if len(content) > MAX_UPLOAD_BYTES:
        return JSONResponse({"detail": "a file is at most 10 MB here"}, 413)
    filename = unquote(request.headers.get("x-filename", "")).strip() or "file"
    filename = filename.replace("/", "_").replace("\\", "_")[:200]
    content_type = request.headers.get("content-type") or "application/octet-stream"
    return JSONResponse(cdn.attachment(filename, content, content_type))


def _signed_in(request: Request, access: Access) -> Response | None:
    """Refuse a request from anywhere but this machine's name, or without the session."""
    if (refused := _local_only(request)) is not None:
        return refused
    return None if access.admits(request) else JSONResponse({"detail": SIGN_IN}, 403)


async def _interaction(request: Request, discord: FakeDiscord) -> Response:
    """A person uses a slash command (or types into one of its options): the fake Discord
    makes the interaction, and the page posts its INTERACTION_CREATE to /webhook, as the
    relay would."""
    try:
        asked = await request.json()
        d = discord.interactions.use(
            str(asked["command"]),
            dict(asked.get("values") or {}),
            user_id=int(asked["user"]),
            channel_id=int(asked["channel"]),
            guild_id=int(asked["guild"]) if asked.get("guild") else None,
            roles=[int(r) for r in asked.get("roles") or []],
            username=str(asked.get("username") or "someone"),
            focused=asked.get("focused") or None,
        )
    except (ValueError, KeyError, TypeError) as exc:
        return JSONResponse({"detail": f"not a command this bot registered: {exc}"}, 422)
    return JSONResponse({"d": d})


def playground_app(
    config: PageConfig,
    feed: Feed,
    access: Access,
    cdn: FakeCDN | None = None,
    discord: FakeDiscord | None = None,
) -> Starlette:
    async def asset(request: Request) -> Response:
        if (refused := _local_only(request)) is not None:
            return refused
        name, media_type = _ASSETS[request.url.path]
        return Response(_asset(name), media_type=media_type, headers={"cache-control": "no-cache"})

    async def settings(request: Request) -> Response:
        if (refused := _local_only(request)) is not None:
            return refused
        headers = {"cache-control": "no-store"}
        if access.admits(request):
            return JSONResponse(config.as_json(), headers=headers)
        session = access.redeem(request.headers.get(TOKEN_HEADER, ""))
        if session is None:
            return JSONResponse({"detail": SIGN_IN}, 403, headers=headers)
        answer = JSONResponse(config.as_json(), headers=headers)
        answer.set_cookie(
            SESSION_COOKIE, session, httponly=True, samesite="strict", path="/playground"
        )
        return answer

    async def events(request: Request) -> Response:
        if (refused := _signed_in(request, access)) is not None:
            return refused
        last = request.headers.get("last-event-id", "")
        after = int(last) if last.isdigit() else 0
        return StreamingResponse(
            feed.follow(after),
            media_type="text/event-stream",
            headers={"cache-control": "no-store", "x-accel-buffering": "no"},
        )

    async def home(request: Request) -> Response:
        return RedirectResponse("/playground", status_code=307)

    async def attach(request: Request) -> Response:
        if (refused := _signed_in(request, access)) is not None:
            return refused
        if cdn is None:
            return JSONResponse({"detail": "attachments are off in this stack"}, 404)
        return await _upload(request, cdn)

    async def commands(request: Request) -> Response:
        if (refused := _signed_in(request, access)) is not None:
            return refused
        registered = discord.interactions.commands.get(None, []) if discord else []
        return JSONResponse(registered)

    async def interact(request: Request) -> Response:
        if (refused := _signed_in(request, access)) is not None:
            return refused
        if discord is None:
            return JSONResponse({"detail": "no fake Discord in this stack"}, 404)
        return await _interaction(request, discord)

    routes = [Route(path, asset, methods=["GET"]) for path in _ASSETS]
    routes += [
        Route("/playground/commands", commands, methods=["GET"]),
        Route("/playground/interactions", interact, methods=["POST"]),
        Route("/playground/config.json", settings, methods=["GET"]),
        Route("/playground/events", events, methods=["GET"]),
        Route("/playground/attachments", attach, methods=["POST"]),
        Route("/", home, methods=["GET"]),
    ]
    return Starlette(routes=routes)
