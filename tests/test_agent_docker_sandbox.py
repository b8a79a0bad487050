"""The docker sandbox against a local fake Docker Engine API: spec, reuse, exec, idle stop."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import httpx
import pytest

from app.agent.fake_docker import ExecOutput, FakeContainer, FakeDocker, frame
from app.agent.sandbox import DockerSandbox
from app.agent.sandbox.docker import CHANNEL_LABEL, LABEL, FrameReader, Limits, container_spec
from tests.support.servers import serve

IMAGE = "debian:bookworm-slim"
T0 = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)


@dataclass
class Clock:
    now: datetime = T0

    def __call__(self) -> datetime:
        return self.now


@dataclass
class Rig:
    docker: FakeDocker
    sandbox: DockerSandbox
    clock: Clock
    http: httpx.AsyncClient


@pytest.fixture
async def rig() -> AsyncIterator[Rig]:
    clock = Clock()
    docker = FakeDocker(clock=clock)
    async with serve(docker.app) as url, httpx.AsyncClient(base_url=url) as http:
        yield Rig(docker, DockerSandbox(http, IMAGE, clock=clock), clock, http)


def running(docker: FakeDocker) -> set[str]:
    return {c.name for c in docker.containers.values() if c.running}


async def test_container_spec_is_locked_down(rig: Rig, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("JINA_API_KEY", "jina-host-secret")

    await rig.sandbox.run(42, "true", 60)

    (spec,) = rig.docker.created
    (container,) = rig.docker.containers.values()
    host = spec["HostConfig"]
    assert container.name == "companion-sandbox-42"
    assert spec["Image"] == IMAGE
    assert spec["WorkingDir"] == "/workspace"
    assert spec["User"] == "1000:1000"
    assert {e.split("=", 1)[0] for e in spec["Env"]} <= {"HOME", "LANG"}
    assert "jina-host-secret" not in json.dumps(spec)
    assert host["CapDrop"] == ["ALL"]
    assert "no-new-privileges:true" in host["SecurityOpt"]
    assert host["Privileged"] is False
    assert host["NanoCpus"] > 0 and host["Memory"] > 0 and host["PidsLimit"] > 0
    assert host["Binds"] == [] and "Mounts" not in host
    assert "docker.sock" not in json.dumps(spec)
    assert "/workspace" in host["Tmpfs"] and "uid=1000" in host["Tmpfs"]["/workspace"]
    assert spec["Labels"] == {LABEL: "1", CHANNEL_LABEL: "42"}


async def test_a_running_container_is_reused(rig: Rig) -> None:
    await rig.sandbox.run(1, "echo a", 60)
    await rig.sandbox.run(1, "echo b", 60)

    assert len(rig.docker.created) == 1
    assert rig.docker.calls.count(("POST", "/containers/companion-sandbox-1/start")) == 1
    assert len(rig.docker.execs) == 2


async def test_a_stopped_container_is_started_again(rig: Rig) -> None:
    await rig.sandbox.run(1, "echo a", 60)
    (container,) = rig.docker.containers.values()
    container.running = False

    result = await rig.sandbox.run(1, "echo b", 60)

    assert result.exit_code == 0
    assert container.running
    assert len(rig.docker.created) == 1


async def test_exec_returns_combined_output_and_exit_code(rig: Rig) -> None:
    seen: list[list[str]] = []

    def handler(cmd: list[str]) -> ExecOutput:
        seen.append(cmd)
        return ExecOutput(stdout=b"hello\n", stderr=b"oops\n", exit_code=2)

    rig.docker.exec_handler = handler

    result = await rig.sandbox.run(3, "ls /nowhere", 60)

    assert (result.exit_code, result.output, result.timed_out) == (2, "hello\noops\n", False)
    assert seen == [["timeout", "-k", "2", "60", "bash", "-lc", "ls /nowhere"]]
    (run,) = rig.docker.execs.values()
    assert run.spec["User"] == "1000:1000" and run.spec["Tty"] is False


async def test_exec_output_keeps_the_tail(rig: Rig) -> None:
    big = "".join(f"{i}\n" for i in range(5000)).encode()
    rig.docker.exec_handler = lambda cmd: ExecOutput(stdout=big)

    result = await rig.sandbox.run(3, "seq 0 4999", 60)

    assert result.output == big.decode()[-4000:]
    assert result.truncated


async def test_in_container_timeout_is_reported(rig: Rig) -> None:
    # `timeout` exits 124 when it had to stop the command, after the full limit.
    rig.docker.exec_handler = lambda cmd: ExecOutput(b"partial\n", exit_code=124, delay_s=0.3)

    result = await rig.sandbox.run(3, "sleep 100", 0.2)

    assert result.timed_out and result.exit_code is None and result.output == "partial\n"


async def test_a_quick_exit_124_is_the_commands_own_code(rig: Rig) -> None:
    rig.docker.exec_handler = lambda cmd: ExecOutput(b"", exit_code=124)

    result = await rig.sandbox.run(3, "exit 124", 60)

    assert (result.timed_out, result.exit_code) == (False, 124)


async def test_missing_image_is_pulled_then_created(rig: Rig) -> None:
    rig.docker.images = set()

    result = await rig.sandbox.run(4, "true", 60)

    assert result.exit_code == 0
    assert ("POST", "/images/create") in rig.docker.calls
    assert rig.docker.images == {IMAGE}


async def test_idle_containers_stop_after_five_minutes(rig: Rig) -> None:
    await rig.sandbox.run(1, "true", 60)
    rig.clock.now = T0 + timedelta(minutes=3)
    await rig.sandbox.run(2, "true", 60)

    assert await rig.sandbox.stop_idle(T0 + timedelta(minutes=4, seconds=59)) == []
    assert running(rig.docker) == {"companion-sandbox-1", "companion-sandbox-2"}

    assert await rig.sandbox.stop_idle(T0 + timedelta(minutes=5)) == [1]
    assert running(rig.docker) == {"companion-sandbox-2"}

    assert await rig.sandbox.stop_idle(T0 + timedelta(minutes=8)) == [2]
    assert running(rig.docker) == set()


async def test_containers_from_an_earlier_worker_count_from_their_start(rig: Rig) -> None:
    spec = container_spec(IMAGE, 9, Limits())
    rig.docker.containers["old"] = FakeContainer(
        id="old", name="companion-sandbox-9", spec=spec, running=True, started_at=T0
    )

    assert await rig.sandbox.stop_idle(T0 + timedelta(minutes=4)) == []
    assert await rig.sandbox.stop_idle(T0 + timedelta(minutes=6)) == [9]
    assert not rig.docker.containers["old"].running


def test_frame_reader_reassembles_frames_split_across_chunks() -> None:
    stream = frame(1, b"hello ") + frame(2, b"world") + frame(1, b"!")
    reader = FrameReader()

    payloads = [p for i in range(0, len(stream), 5) for p in reader.feed(stream[i : i + 5])]

    assert payloads == [b"hello ", b"world", b"!"]


async def test_an_exec_past_the_client_deadline_kills_the_container(rig: Rig) -> None:
    rig.docker.exec_handler = lambda cmd: ExecOutput(stdout=b"late\n", delay_s=1.0)
    sandbox = DockerSandbox(rig.http, IMAGE, clock=rig.clock, grace_s=0.0)

    result = await sandbox.run(5, "sleep 100", 0.2)

    assert result.timed_out and result.exit_code is None
    (container,) = rig.docker.containers.values()
    assert ("POST", f"/containers/{container.id}/kill") in rig.docker.calls
    assert not container.running
