"""The docker sandbox against a local fake Docker Engine API: spec, network, reuse, exec,
idle removal, the cap on running sandboxes."""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import httpx
import pytest

from app.agent.fake_docker import ExecOutput, FakeContainer, FakeDocker, frame
from app.agent.sandbox import DockerSandbox, SandboxBusy
from app.agent.sandbox.docker import (
    API_VERSION,
    CHANNEL_LABEL,
    LABEL,
    FrameReader,
    Limits,
    container_spec,
)
from app.kit.logs import log_context, record_fields
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


def names(docker: FakeDocker) -> set[str]:
    return {c.name for c in docker.containers.values()}


def add_container(
    docker: FakeDocker, channel_id: int, *, running: bool, labels: dict[str, str] | None = None
) -> FakeContainer:
    """A container some other worker (or an older version, or another program) left behind."""
    spec = container_spec(IMAGE, channel_id, Limits())
    if labels is not None:
        spec["Labels"] = labels
    container = FakeContainer(
        id=f"other-{channel_id}",
        name=f"other-{channel_id}",
        spec=spec,
        running=running,
        started_at=T0,
    )
    docker.containers[container.id] = container
    return container


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
    assert host["NetworkMode"] == "none"


@pytest.mark.parametrize(
    ("network", "mode"), [(None, "none"), ("none", "none"), ("sandbox-egress", "sandbox-egress")]
)
def test_container_spec_network_mode(network: str | None, mode: str) -> None:
    spec = (
        container_spec(IMAGE, 1, Limits())
        if network is None
        else container_spec(IMAGE, 1, Limits(), network)
    )

    assert spec["HostConfig"]["NetworkMode"] == mode


@pytest.mark.parametrize("network", ["none", "bridge"])
async def test_the_engine_receives_the_configured_network_mode(rig: Rig, network: str) -> None:
    sandbox = DockerSandbox(rig.http, IMAGE, clock=rig.clock, network=network)

    await sandbox.run(7, "true", 60)

    (spec,) = rig.docker.created
    assert spec["HostConfig"]["NetworkMode"] == network


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


async def test_idle_containers_are_stopped_then_removed_after_five_minutes(rig: Rig) -> None:
    await rig.sandbox.run(1, "true", 60)
    rig.clock.now = T0 + timedelta(minutes=3)
    await rig.sandbox.run(2, "true", 60)
    ids = [rig.docker.find(f"companion-sandbox-{n}").id for n in (1, 2)]  # type: ignore[union-attr]

    assert await rig.sandbox.stop_idle(T0 + timedelta(minutes=4, seconds=59)) == []
    assert (
        names(rig.docker)
        == running(rig.docker)
        == {
            "companion-sandbox-1",
            "companion-sandbox-2",
        }
    )

    assert await rig.sandbox.stop_idle(T0 + timedelta(minutes=5)) == [1]
    assert names(rig.docker) == running(rig.docker) == {"companion-sandbox-2"}

    assert await rig.sandbox.stop_idle(T0 + timedelta(minutes=8)) == [2]
    assert names(rig.docker) == set()
    ends = [c for c in rig.docker.calls if c[0] == "DELETE" or c[1].endswith("/stop")]
    assert ends == [
        (method, path)
        for cid in ids
        for method, path in [("POST", f"/containers/{cid}/stop"), ("DELETE", f"/containers/{cid}")]
    ]


async def test_a_used_container_is_not_removed_and_a_new_one_comes_after_removal(
    rig: Rig,
) -> None:
    await rig.sandbox.run(1, "echo a", 60)
    assert await rig.sandbox.stop_idle(T0 + timedelta(minutes=6)) == [1]

    rig.clock.now = T0 + timedelta(minutes=7)
    result = await rig.sandbox.run(1, "echo b", 60)

    assert result.exit_code == 0
    assert len(rig.docker.created) == 2
    assert running(rig.docker) == {"companion-sandbox-1"}


async def test_the_sweep_removes_our_stopped_leftovers_and_nothing_else(rig: Rig) -> None:
    add_container(rig.docker, 21, running=False)  # exited: stopped by an older version
    never_started = add_container(rig.docker, 22, running=False)
    never_started.started_at = None  # "created": a start that failed
    add_container(rig.docker, 23, running=True)  # another worker's, in use (recent start)
    add_container(rig.docker, 24, running=False, labels={"app": "someone-else"})
    rig.docker.containers["other-23"].started_at = T0 + timedelta(minutes=2)

    removed = await rig.sandbox.stop_idle(T0 + timedelta(minutes=3))

    assert sorted(removed) == [21, 22]
    assert names(rig.docker) == {"other-23", "other-24"}


async def test_containers_from_an_earlier_worker_count_from_their_start(rig: Rig) -> None:
    spec = container_spec(IMAGE, 9, Limits())
    rig.docker.containers["old"] = FakeContainer(
        id="old", name="companion-sandbox-9", spec=spec, running=True, started_at=T0
    )

    assert await rig.sandbox.stop_idle(T0 + timedelta(minutes=4)) == []
    assert await rig.sandbox.stop_idle(T0 + timedelta(minutes=6)) == [9]
    assert "old" not in rig.docker.containers


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


async def test_the_fake_engine_deletes_like_docker(rig: Rig) -> None:
    """404 for an unknown container, 409 for a running one without force, 204 otherwise."""
    add_container(rig.docker, 31, running=True)
    add_container(rig.docker, 32, running=True)
    add_container(rig.docker, 33, running=False)
    v = f"/{API_VERSION}"

    unknown = await rig.http.delete(f"{v}/containers/nope")
    busy = await rig.http.delete(f"{v}/containers/other-31")
    forced = await rig.http.delete(f"{v}/containers/other-32", params={"force": "true"})
    stopped = await rig.http.delete(f"{v}/containers/other-33")

    assert (unknown.status_code, busy.status_code) == (404, 409)
    assert "cannot remove a running container" in busy.json()["message"]
    assert (forced.status_code, stopped.status_code) == (204, 204)
    assert names(rig.docker) == {"other-31"}


async def test_the_fake_engine_lists_running_containers_unless_asked_for_all(rig: Rig) -> None:
    add_container(rig.docker, 41, running=True)
    add_container(rig.docker, 42, running=False)
    v = f"/{API_VERSION}"

    default = await rig.http.get(f"{v}/containers/json")
    every = await rig.http.get(f"{v}/containers/json", params={"all": "true"})
    exited = await rig.http.get(
        f"{v}/containers/json", params={"filters": json.dumps({"status": ["exited"]})}
    )

    assert [c["Id"] for c in default.json()] == ["other-41"]
    assert [c["Id"] for c in every.json()] == ["other-41", "other-42"]
    assert [(c["Id"], c["State"]) for c in exited.json()] == [("other-42", "exited")]


async def test_a_new_channels_sandbox_is_not_started_at_the_cap(rig: Rig) -> None:
    add_container(rig.docker, 51, running=True)  # other workers' sandboxes count too
    add_container(rig.docker, 52, running=True)
    add_container(rig.docker, 53, running=False)  # stopped ones do not
    sandbox = DockerSandbox(rig.http, IMAGE, clock=rig.clock, max_containers=2)

    with pytest.raises(SandboxBusy, match="all sandboxes are busy, try again later"):
        await sandbox.run(5, "true", 60)

    assert rig.docker.created == []
    assert running(rig.docker) == {"other-51", "other-52"}


async def test_a_stopped_sandbox_is_not_restarted_at_the_cap(rig: Rig) -> None:
    sandbox = DockerSandbox(rig.http, IMAGE, clock=rig.clock, max_containers=1)
    await sandbox.run(5, "true", 60)
    rig.docker.find("companion-sandbox-5").running = False  # type: ignore[union-attr]
    add_container(rig.docker, 51, running=True)

    with pytest.raises(SandboxBusy):
        await sandbox.run(5, "true", 60)

    assert running(rig.docker) == {"other-51"}


async def test_a_running_sandbox_keeps_serving_its_channel_at_the_cap(rig: Rig) -> None:
    sandbox = DockerSandbox(rig.http, IMAGE, clock=rig.clock, max_containers=2)
    await sandbox.run(1, "true", 60)
    await sandbox.run(2, "true", 60)

    again = await sandbox.run(1, "echo again", 60)

    assert again.exit_code == 0
    with pytest.raises(SandboxBusy):
        await sandbox.run(3, "true", 60)
    assert running(rig.docker) == {"companion-sandbox-1", "companion-sandbox-2"}


async def test_a_start_racing_another_worker_past_the_cap_backs_off(rig: Rig) -> None:
    add_container(rig.docker, 51, running=True)
    sandbox = DockerSandbox(rig.http, IMAGE, clock=rig.clock, max_containers=2)

    def another_worker_starts_one_too(method: str, path: str) -> None:
        if path == "/containers/companion-sandbox-6/start":
            add_container(rig.docker, 52, running=True)

    rig.docker.on_request = another_worker_starts_one_too

    with pytest.raises(SandboxBusy):
        await sandbox.run(6, "true", 60)

    assert names(rig.docker) == running(rig.docker) == {"other-51", "other-52"}
    assert rig.docker.execs == {}


async def test_a_container_removed_by_another_sweep_mid_start_is_created_again(rig: Rig) -> None:
    await rig.sandbox.run(8, "true", 60)
    rig.docker.find("companion-sandbox-8").running = False  # type: ignore[union-attr]
    swept: list[str] = []

    def another_worker_sweeps(method: str, path: str) -> None:
        if path == "/containers/companion-sandbox-8/start" and not swept:
            gone = rig.docker.find("companion-sandbox-8")
            assert gone is not None
            swept.append(gone.id)
            del rig.docker.containers[gone.id]

    rig.docker.on_request = another_worker_sweeps

    result = await rig.sandbox.run(8, "echo again", 60)

    assert result.exit_code == 0
    assert len(swept) == 1 and len(rig.docker.created) == 2
    assert running(rig.docker) == {"companion-sandbox-8"}


async def test_sandbox_logs_inside_a_task_log_context_at_info_level(
    rig: Rig, caplog: pytest.LogCaptureFixture
) -> None:
    # A record's `extra` repeating a log-context key raises; at INFO that broke every start.
    caplog.set_level(logging.INFO, logger="app.agent")
    sandbox = DockerSandbox(rig.http, IMAGE, clock=rig.clock, max_containers=1)

    with log_context(channel_id=61):
        first = await sandbox.run(61, "true", 60)
        with pytest.raises(SandboxBusy):
            await sandbox.run(62, "true", 60)

    assert first.exit_code == 0
    events = [(r.getMessage(), record_fields(r).get("channel_id")) for r in caplog.records]
    assert ("sandbox started", 61) in events
    assert ("sandbox cap reached", 62) in events
