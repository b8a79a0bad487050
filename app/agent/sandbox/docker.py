"""Docker sandbox: one locked-down container per channel, driven through the Engine API.

The container starts on demand (at most ``max_containers`` at once), has no network unless the
operator names one, keeps /workspace (a tmpfs) while it runs, holds no credentials, never sees
the Docker socket, and is stopped and removed after five idle minutes."""

from __future__ import annotations

import asyncio
import json
import logging
import math
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, NoReturn

import httpx

from app.agent.sandbox.base import (
    KILL_AFTER_S,
    CommandResult,
    SandboxBusy,
    SandboxError,
    TailBuffer,
    result_from,
)
from app.kit.clock import utcnow
from app.kit.logs import log_context
from app.kit.tls import httpx_tls

log = logging.getLogger(__name__)

API_VERSION = "v1.41"
NAME_PREFIX = "companion-sandbox-"
LABEL = "companion.sandbox"
CHANNEL_LABEL = "companion.channel"
SANDBOX_USER = "1000:1000"
WORKSPACE = "/workspace"
IDLE_AFTER = timedelta(minutes=5)
NO_NETWORK = "none"
MAX_CONTAINERS = 4
# Beyond the in-container `timeout`, how long the client waits before killing the container.
CLIENT_GRACE_S = 10.0
# `timeout` exits 124 after TERM, 137 when it had to KILL.
TIMEOUT_EXIT_CODES = (124, 137)


@dataclass(frozen=True, slots=True)
class Limits:
    nano_cpus: int = 1_000_000_000
    memory_bytes: int = 512 * 1024 * 1024
    pids: int = 256
    workspace_size: str = "256m"


def container_name(channel_id: int) -> str:
    return f"{NAME_PREFIX}{int(channel_id)}"


def channel_of(item: dict[str, Any]) -> int | None:
    """The channel a listed sandbox container serves, None when its label is missing or bad."""
    try:
        return int((item.get("Labels") or {})[CHANNEL_LABEL])
    except (KeyError, TypeError, ValueError):
        return None


def container_spec(
    image: str, channel_id: int, limits: Limits, network: str = NO_NETWORK
) -> dict[str, Any]:
    """The create body: no network unless ``network`` names one, no host environment, no
    socket, no capabilities, non-root, bounded."""
    uid, gid = SANDBOX_USER.split(":")
    return {
        "Image": image,
        "Cmd": ["sleep", "infinity"],
        "WorkingDir": WORKSPACE,
        "User": SANDBOX_USER,
        "Env": [f"HOME={WORKSPACE}", "LANG=C.UTF-8"],
        "Hostname": "sandbox",
        "Labels": {LABEL: "1", CHANNEL_LABEL: str(int(channel_id))},
        "HostConfig": {
            "Init": True,
            "NanoCpus": limits.nano_cpus,
            "Memory": limits.memory_bytes,
            "MemorySwap": limits.memory_bytes,
            "PidsLimit": limits.pids,
            "CapDrop": ["ALL"],
            "SecurityOpt": ["no-new-privileges:true"],
            "Privileged": False,
            "ReadonlyRootfs": True,
            "Binds": [],
            # "none": a loopback interface only. Any network reaches whatever it routes to.
            "NetworkMode": network,
            # tmpfs owned by the sandbox user: files live exactly as long as the container runs.
            "Tmpfs": {
                WORKSPACE: f"rw,exec,size={limits.workspace_size},uid={uid},gid={gid},mode=0700",
                "/tmp": f"rw,exec,size=64m,uid={uid},gid={gid},mode=1777",
            },
            "RestartPolicy": {"Name": "no"},
        },
    }


def exec_spec(command: str, timeout_s: float) -> dict[str, Any]:
    # GNU timeout signals its whole process group, so background jobs die with the command.
    return {
        "AttachStdin": False,
        "AttachStdout": True,
        "AttachStderr": True,
        "Tty": False,
        "User": SANDBOX_USER,
        "WorkingDir": WORKSPACE,
        "Cmd": [
            "timeout",
            "-k",
            str(KILL_AFTER_S),
            str(max(1, math.ceil(timeout_s))),
            "bash",
            "-lc",
            command,
        ],
    }


class FrameReader:
    """Demultiplexes Docker's attach stream: 8-byte header (stream, 0, 0, 0, size BE) + payload."""

    def __init__(self) -> None:
        self._pending = bytearray()

    def feed(self, chunk: bytes) -> list[bytes]:
        self._pending += chunk
        payloads: list[bytes] = []
        while len(self._pending) >= 8:
            size = int.from_bytes(self._pending[4:8], "big")
            if len(self._pending) < 8 + size:
                break
            payloads.append(bytes(self._pending[8 : 8 + size]))
            del self._pending[: 8 + size]
        return payloads


def parse_docker_time(value: str) -> datetime:
    """Docker timestamps carry nanoseconds; Python keeps microseconds."""
    trimmed = re.sub(r"(\.\d{6})\d+", r"\1", value).replace("Z", "+00:00")
    return datetime.fromisoformat(trimmed)


def docker_client(docker_url: str) -> httpx.AsyncClient:
    """A client for the Engine API: unix socket for ``unix://`` URLs, plain HTTP otherwise."""
    if docker_url.startswith("unix://"):
        transport = httpx.AsyncHTTPTransport(
            uds=docker_url.removeprefix("unix://"), verify=httpx_tls()
        )
        return httpx.AsyncClient(transport=transport, base_url="http://docker", timeout=30.0)
    return httpx.AsyncClient(base_url=docker_url, timeout=30.0, verify=httpx_tls())


class DockerSandbox:
    def __init__(
        self,
        client: httpx.AsyncClient,
        image: str,
        *,
        network: str = NO_NETWORK,
        max_containers: int = MAX_CONTAINERS,
        limits: Limits | None = None,
        clock: Callable[[], datetime] = utcnow,
        grace_s: float = CLIENT_GRACE_S,
    ) -> None:
        self._client = client
        self._grace_s = grace_s
        self._image = image
        self._network = network
        self._max_containers = max_containers
        self._limits = limits or Limits()
        self._clock = clock
        self._last_used: dict[int, datetime] = {}
        self._busy: dict[int, int] = {}
        self._locks: dict[int, asyncio.Lock] = {}

    async def run(self, channel_id: int, command: str, timeout_s: float) -> CommandResult:
        # The channel goes in the log context: a record's `extra` may not repeat a context key.
        with log_context(channel_id=channel_id):
            self._touch(channel_id, +1)
            try:
                container = await self._ensure_running(channel_id)
                return await self._exec(container, command, timeout_s)
            except httpx.HTTPError as exc:
                raise SandboxError(f"docker engine unreachable: {type(exc).__name__}") from None
            finally:
                self._touch(channel_id, -1)

    async def stop_idle(self, now: datetime) -> list[int]:
        """Stop and remove sandbox containers unused for five minutes, and remove our stopped
        leftovers (a crash between stop and remove, a kill, an older version); return the
        channel ids whose container was removed.

        Containers this process never used (a restarted worker) count from their start time.
        Engine errors are logged and end this sweep; the next one tries again."""
        removed: list[int] = []
        try:
            await self._sweep(now, removed)
        except (httpx.HTTPError, SandboxError) as exc:
            log.warning("sandbox idle sweep failed", extra={"error": type(exc).__name__})
        return removed

    async def _sweep(self, now: datetime, removed: list[int]) -> None:
        for item in await self._list(running_only=False):
            channel_id = channel_of(item)
            if channel_id is not None and self._busy.get(channel_id):
                continue
            was_running = item.get("State") == "running"
            if was_running:
                if not await self._idle(item["Id"], channel_id, now):
                    continue
                await self._post(f"/containers/{item['Id']}/stop", params={"t": "5"})
            if not await self._remove(item["Id"]):
                continue  # started again since we listed it: someone is using it
            if channel_id is not None:
                self._last_used.pop(channel_id, None)
                removed.append(channel_id)
            with log_context(channel_id=channel_id):
                log.info("sandbox removed", extra={"was_running": was_running})

    def _touch(self, channel_id: int, delta: int) -> None:
        self._busy[channel_id] = self._busy.get(channel_id, 0) + delta
        self._last_used[channel_id] = self._clock()

    async def _idle(self, container_id: str, channel_id: int | None, now: datetime) -> bool:
        last = self._last_used.get(channel_id) if channel_id is not None else None
        if last is None:
            info = await self._inspect(container_id)
            if info is None:
                return False
            last = parse_docker_time(info["State"]["StartedAt"])
        return now - last >= IDLE_AFTER

    async def _ensure_running(self, channel_id: int) -> str:
        lock = self._locks.setdefault(channel_id, asyncio.Lock())
        async with lock:
            # Twice: another worker's sweep may remove the container between our calls.
            for _ in range(2):
                container = await self._start(channel_id)
                if container is not None:
                    return container
            raise SandboxError("sandbox container vanished while starting")

    async def _start(self, channel_id: int) -> str | None:
        """The channel's running container id; None when it vanished on the way."""
        name = container_name(channel_id)
        info = await self._inspect(name)
        if info is not None and info["State"]["Running"]:
            return str(info["Id"])
        if await self._count_running() >= self._max_containers:
            self._refuse()
        if info is None:
            await self._create(name, channel_id)
        response = await self._client.post(_path(f"/containers/{name}/start"))
        if response.status_code == 404:
            return None
        if response.status_code not in (204, 304):  # 304: another job started it first
            raise SandboxError(f"container start failed: HTTP {response.status_code}")
        # Workers check the cap at the same time; whoever sees it exceeded after starting
        # backs off, so the engine never keeps more than the cap running.
        if await self._count_running() > self._max_containers:
            await self._remove(name, force=True)
            self._refuse()
        log.info("sandbox started")
        info = await self._inspect(name)
        return str(info["Id"]) if info is not None else None

    def _refuse(self) -> NoReturn:
        log.warning("sandbox cap reached", extra={"max_containers": self._max_containers})
        raise SandboxBusy()

    async def _create(self, name: str, channel_id: int) -> None:
        spec = container_spec(self._image, channel_id, self._limits, self._network)
        response = await self._client.post(
            _path("/containers/create"), params={"name": name}, json=spec
        )
        if response.status_code == 404:  # image not present yet: pull once, then retry
            await self._pull()
            response = await self._client.post(
                _path("/containers/create"), params={"name": name}, json=spec
            )
        if response.status_code not in (201, 409):  # 409: another job created it first
            raise SandboxError(f"container create failed: HTTP {response.status_code}")

    async def _pull(self) -> None:
        image, _, tag = self._image.partition(":")
        params = {"fromImage": image, "tag": tag or "latest"}
        async with self._client.stream(
            "POST", _path("/images/create"), params=params, timeout=120.0
        ) as response:
            async for _ in response.aiter_bytes():
                pass  # progress lines; the pull is done when the stream ends
            if response.status_code != 200:
                raise SandboxError(f"image pull failed: HTTP {response.status_code}")

    async def _exec(self, container: str, command: str, timeout_s: float) -> CommandResult:
        created = await self._client.post(
            _path(f"/containers/{container}/exec"), json=exec_spec(command, timeout_s)
        )
        if created.status_code != 201:
            raise SandboxError(f"exec create failed: HTTP {created.status_code}")
        exec_id = created.json()["Id"]
        buffer = TailBuffer()
        started = time.monotonic()
        try:
            async with asyncio.timeout(timeout_s + self._grace_s):
                await self._stream(exec_id, buffer)
        except TimeoutError:
            # The in-container timeout failed to end it; the container is the only handle left.
            await self._post(f"/containers/{container}/kill")
            return result_from(buffer, None, timed_out=True)
        inspected = await self._client.get(_path(f"/exec/{exec_id}/json"))
        exit_code = inspected.json().get("ExitCode") if inspected.status_code == 200 else None
        timed_out = exit_code in TIMEOUT_EXIT_CODES and time.monotonic() - started >= timeout_s
        return result_from(buffer, None if timed_out else exit_code, timed_out=timed_out)

    async def _stream(self, exec_id: str, buffer: TailBuffer) -> None:
        frames = FrameReader()
        body = {"Detach": False, "Tty": False}
        timeout = httpx.Timeout(30.0, read=None)  # bounded by the caller's deadline
        async with self._client.stream(
            "POST", _path(f"/exec/{exec_id}/start"), json=body, timeout=timeout
        ) as response:
            if response.status_code != 200:
                raise SandboxError(f"exec start failed: HTTP {response.status_code}")
            async for chunk in response.aiter_bytes():
                for payload in frames.feed(chunk):
                    buffer.feed(payload)

    async def _inspect(self, ref: str) -> dict[str, Any] | None:
        response = await self._client.get(_path(f"/containers/{ref}/json"))
        if response.status_code == 404:
            return None
        if response.status_code != 200:
            raise SandboxError(f"container inspect failed: HTTP {response.status_code}")
        info: dict[str, Any] = response.json()
        return info

    async def _list(self, *, running_only: bool) -> list[dict[str, Any]]:
        """Our sandbox containers (by label), in every state unless ``running_only``."""
        wanted: dict[str, list[str]] = {"label": [f"{LABEL}=1"]}
        if running_only:
            wanted["status"] = ["running"]
        params = {"filters": json.dumps(wanted), "all": "false" if running_only else "true"}
        response = await self._client.get(_path("/containers/json"), params=params)
        if response.status_code != 200:
            raise SandboxError(f"container list failed: HTTP {response.status_code}")
        items: list[dict[str, Any]] = response.json()
        return items

    async def _count_running(self) -> int:
        """Running sandboxes of every worker: the engine is the one place that knows."""
        return len(await self._list(running_only=True))

    async def _remove(self, ref: str, *, force: bool = False) -> bool:
        """Delete the container; False when it is running (409) and ``force`` was not given."""
        params = {"force": "true"} if force else None
        response = await self._client.delete(_path(f"/containers/{ref}"), params=params)
        if response.status_code == 409:
            return False
        if response.status_code not in (204, 404):  # 404: already gone
            raise SandboxError(f"container remove failed: HTTP {response.status_code}")
        return True

    async def _post(self, path: str, params: dict[str, str] | None = None) -> None:
        response = await self._client.post(_path(path), params=params)
        # 304: already stopped; 404 on stop/kill: already gone. Both are fine.
        if response.status_code not in (200, 204, 304, 404):
            raise SandboxError(f"{path} failed: HTTP {response.status_code}")


def _path(path: str) -> str:
    return f"/{API_VERSION}{path}"
