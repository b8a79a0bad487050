"""The real commands refuse to start with an unsafe configuration (docs/operations.md): a non-zero
exit and a message that names the variable and never holds its value."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from tests.conftest import REDIS_URL
from tests.support.servers import free_port

GOOD_TOKEN = "startup-gateway-token-1f2e3d4c5b6a7988"
ANTHROPIC_MARKER = "sk-ant-startup-marker-0d1c2b3a"  # must never be printed either
START_TIMEOUT_S = 60


def environment(database_url: str, **variables: str) -> dict[str, str]:
    """Only what the command needs: nothing from the developer's shell but the basics."""
    env = {k: v for k, v in os.environ.items() if k in ("PATH", "HOME", "LANG", "TMPDIR")}
    env.update(
        DATABASE_URL=database_url,
        REDIS_URL=REDIS_URL,
        GATEWAY_TOKEN=GOOD_TOKEN,
        ANTHROPIC_API_KEY=ANTHROPIC_MARKER,
        DISCORD_BOT_TOKEN="startup-bot-token",
        DISCORD_BOT_USER_ID="1000",
        WORKER_METRICS_PORT=str(free_port()),
    )
    env.update(variables)
    return env


def run(args: list[str], env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    # cwd is an empty directory, so no .env is read.
    return subprocess.run(
        [sys.executable, "-m", *args],
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=START_TIMEOUT_S,
    )


UNSAFE = {
    "gateway-token-empty": ({"GATEWAY_TOKEN": ""}, "GATEWAY_TOKEN is empty", None),
    "gateway-token-short": (
        {"GATEWAY_TOKEN": "short-real-looking-token-93"},
        "GATEWAY_TOKEN is shorter than 32 characters",
        "short-real-looking-token-93",
    ),
    "gateway-token-placeholder": (
        {"GATEWAY_TOKEN": "Change-Me"},
        "GATEWAY_TOKEN is a placeholder",
        "Change-Me",
    ),
    "gateway-token-previous-short": (
        {"GATEWAY_TOKEN_PREVIOUS": "previous-token-only-28-chars"},
        "GATEWAY_TOKEN_PREVIOUS is shorter than 32 characters",
        "previous-token-only-28-chars",
    ),
    "admin-secret-short": (
        {"ADMIN_SECRET": "admin-secret-only-26-chars"},
        "ADMIN_SECRET is shorter than 32 characters",
        "admin-secret-only-26-chars",
    ),
    "jev-url-without-key": (
        {"JEV_URL": "http://jev.internal:8001", "JEV_API_KEY": ""},
        "JEV_URL is set without JEV_API_KEY",
        None,
    ),
}


def assert_refused(
    result: subprocess.CompletedProcess[str], message: str, value: str | None
) -> None:
    output = result.stdout + result.stderr
    assert result.returncode != 0, output
    assert message in output, output
    assert ANTHROPIC_MARKER not in output
    if value is not None:
        assert value not in output


@pytest.mark.parametrize("case", list(UNSAFE))
def test_api_refuses_to_start(database_url: str, tmp_path: Path, case: str) -> None:
    variables, message, value = UNSAFE[case]
    env = environment(database_url, **variables)

    result = run(["uvicorn", "app.main:app", "--port", str(free_port())], env, tmp_path)

    assert_refused(result, message, value)


@pytest.mark.parametrize(
    "case",
    [
        "gateway-token-short",
        "gateway-token-previous-short",
        "admin-secret-short",
        "jev-url-without-key",
    ],
)
def test_worker_refuses_to_start(database_url: str, tmp_path: Path, case: str) -> None:
    variables, message, value = UNSAFE[case]
    env = environment(database_url, **variables)

    result = run(["app", "worker"], env, tmp_path)

    assert_refused(result, message, value)


def test_decision_service_refuses_to_start_without_a_key(tmp_path: Path) -> None:
    env = environment("unused", JEV_API_KEY="")

    result = run(["uvicorn", "app.jev.main:app", "--port", str(free_port())], env, tmp_path)

    assert_refused(result, "JEV_API_KEY is required", None)


def test_decision_service_without_a_key_starts_only_with_the_flag_and_warns(
    tmp_path: Path,
) -> None:
    env = environment("unused", JEV_ALLOW_NO_KEY="true")
    port = free_port()
    log = tmp_path / "jev.log"
    with log.open("w") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "uvicorn", "app.jev.main:app", "--port", str(port)],
            env=env,
            cwd=tmp_path,
            stdout=out,
            stderr=subprocess.STDOUT,
            text=True,
        )
    try:
        assert wait_healthy(f"http://127.0.0.1:{port}/healthz", process), log.read_text()
    finally:
        process.terminate()
        process.wait(timeout=START_TIMEOUT_S)
    output = log.read_text()
    assert "JEV_ALLOW_NO_KEY is set" in output and "local development only" in output
    assert ANTHROPIC_MARKER not in output


def wait_healthy(url: str, process: subprocess.Popen[str]) -> bool:
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline and process.poll() is None:
        try:
            if httpx.get(url, timeout=1).status_code == 200:
                return True
        except httpx.TransportError:
            time.sleep(0.05)  # polling the port until the server answers, not a wait in time
    return False
