"""A small local fake of the Docker Engine API: the calls the docker sandbox makes.

Containers (create/inspect/list/start/stop/kill/delete, with the engine's status codes),
exec (create/start/inspect, output as Docker's multiplexed stream) and image pull. Records
create specs and every call."""

from __future__ import annotations

import asyncio
import itertools
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from fastapi import FastAPI, Query, Request, Response
from fastapi.responses import JSONResponse

from app.agent.sandbox.docker import API_VERSION
from app.kit.clock import utcnow


@dataclass(frozen=True)
class ExecOutput:
    stdout: bytes = b""
    stderr: bytes = b""
    exit_code: int = 0
    delay_s: float = 0.0  # hold the stream open this long first (an exec that hangs)


ExecHandler = Callable[[list[str]], ExecOutput]


@dataclass
class FakeContainer:
    id: str
    name: str
    spec: dict[str, Any]
    running: bool = False
    started_at: datetime | None = None


@dataclass
class FakeExec:
    id: str
    container: str
    spec: dict[str, Any]
    exit_code: int | None = None


def frame(stream: int, payload: bytes) -> bytes:
    """One multiplexed frame: stream (1 stdout, 2 stderr), three zero bytes, size, payload."""
    return bytes([stream, 0, 0, 0]) + len(payload).to_bytes(4, "big") + payload


def _echo(cmd: list[str]) -> ExecOutput:
    return ExecOutput(stdout=(" ".join(cmd) + "\n").encode())


@dataclass
class FakeDocker:
    exec_handler: ExecHandler = _echo
    images: set[str] | None = None  # None: every image is present
    clock: Callable[[], datetime] = utcnow
    containers: dict[str, FakeContainer] = field(default_factory=dict)  # by id
    execs: dict[str, FakeExec] = field(default_factory=dict)
    created: list[dict[str, Any]] = field(default_factory=list)
    calls: list[tuple[str, str]] = field(default_factory=list)
    # Runs before each request is handled, with (method, path): a test's stand-in for
    # another worker acting at that moment.
    on_request: Callable[[str, str], None] | None = None
    _ids: itertools.count[int] = field(default_factory=lambda: itertools.count(1))

    def find(self, ref: str) -> FakeContainer | None:
        if ref in self.containers:
            return self.containers[ref]
        return next((c for c in self.containers.values() if c.name == ref), None)

    @property
    def app(self) -> FastAPI:
        app = FastAPI()

        @app.middleware("http")
        async def record(request: Request, call_next: Any) -> Any:
            call = (request.method, request.url.path.removeprefix(f"/{API_VERSION}"))
            self.calls.append(call)
            if self.on_request is not None:
                self.on_request(*call)
            return await call_next(request)

        self._container_routes(app)
        self._exec_routes(app)
        return app

    def _container_routes(self, app: FastAPI) -> None:
        v = f"/{API_VERSION}"

        @app.get(v + "/containers/json")
        async def list_(
            filters: str = "{}", every: str = Query("false", alias="all")
        ) -> JSONResponse:
            wanted = json.loads(filters)
            labels = dict(item.split("=", 1) for item in wanted.get("label", []))
            # Like the engine: running ones only, unless `all` or a status filter says otherwise.
            statuses = set(wanted.get("status", []))
            if not statuses and every not in ("1", "true", "True"):
                statuses = {"running"}
            return JSONResponse(
                [
                    self._summary(c)
                    for c in self.containers.values()
                    if (not statuses or _state(c) in statuses) and _labelled(c, labels)
                ]
            )

        @app.post(v + "/containers/create")
        async def create(name: str, request: Request) -> JSONResponse:
            spec = await request.json()
            if self.images is not None and spec["Image"] not in self.images:
                return _error(404, f"No such image: {spec['Image']}")
            if self.find(name) is not None:
                return _error(409, "Conflict. The container name is already in use")
            container = FakeContainer(id=f"c{next(self._ids):04d}", name=name, spec=spec)
            self.containers[container.id] = container
            self.created.append(spec)
            return JSONResponse({"Id": container.id, "Warnings": []}, status_code=201)

        @app.get(v + "/containers/{ref}/json")
        async def inspect(ref: str) -> JSONResponse:
            c = self.find(ref)
            return JSONResponse(self._inspect(c)) if c else _error(404, "No such container")

        @app.post(v + "/containers/{ref}/start")
        async def start(ref: str) -> Response:
            return self._set_running(ref, True)

        @app.post(v + "/containers/{ref}/stop")
        async def stop(ref: str) -> Response:
            return self._set_running(ref, False)

        @app.post(v + "/containers/{ref}/kill")
        async def kill(ref: str) -> Response:
            return self._set_running(ref, False)

        @app.delete(v + "/containers/{ref}")
        async def delete(ref: str, force: str = "false") -> Response:
            c = self.find(ref)
            if c is None:
                return _error(404, f"No such container: {ref}")
            if c.running and force not in ("1", "true", "True"):
                return _error(
                    409,
                    f"You cannot remove a running container {c.id}. "
                    "Stop the container before attempting removal or force remove",
                )
            del self.containers[c.id]
            return Response(status_code=204)

        @app.post(v + "/images/create")
        async def pull(fromImage: str, tag: str = "latest") -> Response:
            if self.images is not None:
                self.images.add(f"{fromImage}:{tag}")
            return Response(b'{"status":"Pulling"}\n{"status":"Downloaded"}\n')

    def _exec_routes(self, app: FastAPI) -> None:
        v = f"/{API_VERSION}"

        @app.post(v + "/containers/{ref}/exec")
        async def exec_create(ref: str, request: Request) -> JSONResponse:
            c = self.find(ref)
            if c is None:
                return _error(404, "No such container")
            if not c.running:
                return _error(409, f"Container {c.id} is not running")
            run = FakeExec(id=f"e{next(self._ids):04d}", container=c.id, spec=await request.json())
            self.execs[run.id] = run
            return JSONResponse({"Id": run.id}, status_code=201)

        @app.post(v + "/exec/{exec_id}/start")
        async def exec_start(exec_id: str) -> Response:
            run = self.execs.get(exec_id)
            if run is None:
                return _error(404, "No such exec instance")
            output = self.exec_handler(run.spec["Cmd"])
            await asyncio.sleep(output.delay_s)
            run.exit_code = output.exit_code
            body = frame(1, output.stdout) if output.stdout else b""
            body += frame(2, output.stderr) if output.stderr else b""
            return Response(body, media_type="application/vnd.docker.multiplexed-stream")

        @app.get(v + "/exec/{exec_id}/json")
        async def exec_inspect(exec_id: str) -> JSONResponse:
            run = self.execs.get(exec_id)
            if run is None:
                return _error(404, "No such exec instance")
            return JSONResponse(
                {
                    "ID": run.id,
                    "Running": False,
                    "ExitCode": run.exit_code,
                    "ContainerID": run.container,
                }
            )

    def _set_running(self, ref: str, running: bool) -> Response:
        c = self.find(ref)
        if c is None:
            return _error(404, "No such container")
        if c.running == running:
            return Response(status_code=304)
        c.running = running
        c.started_at = self.clock() if running else c.started_at
        return Response(status_code=204)

    def _summary(self, c: FakeContainer) -> dict[str, Any]:
        return {
            "Id": c.id,
            "Names": [f"/{c.name}"],
            "State": _state(c),
            "Labels": c.spec.get("Labels", {}),
        }

    def _inspect(self, c: FakeContainer) -> dict[str, Any]:
        started = (
            c.started_at.strftime("%Y-%m-%dT%H:%M:%S.%f123Z")
            if c.started_at
            else ("0001-01-01T00:00:00Z")
        )
        return {
            "Id": c.id,
            "Name": f"/{c.name}",
            "State": {"Running": c.running, "StartedAt": started},
            "Config": {k: v for k, v in c.spec.items() if k != "HostConfig"},
            "HostConfig": c.spec.get("HostConfig", {}),
        }


def _state(c: FakeContainer) -> str:
    if c.running:
        return "running"
    return "exited" if c.started_at is not None else "created"


def _labelled(c: FakeContainer, labels: dict[str, str]) -> bool:
    return all(c.spec.get("Labels", {}).get(k) == v for k, v in labels.items())


def _error(status: int, message: str) -> JSONResponse:
    return JSONResponse({"message": message}, status_code=status)
