"""docker-compose.yml stays a valid compose file that runs the documented commands, and gives
each draining process more time than its drain takes before compose kills it."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from app.config import Settings
from app.kit.arqworker import RELEASE_WAIT_S
from app.relay.service import CLOSE_TIMEOUT_S
from app.relay.settings import RelaySettings

ROOT = Path(__file__).resolve().parents[2]
COMPOSE = shutil.which("docker-compose")


@pytest.fixture(scope="module")
def config(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """`docker-compose config`: the file as compose reads it (an empty .env beside it)."""
    if COMPOSE is None:
        pytest.skip("docker-compose is not installed")
    tmp = tmp_path_factory.mktemp("compose")
    shutil.copy(ROOT / "docker-compose.yml", tmp / "docker-compose.yml")
    (tmp / ".env").write_text("")
    env = {**os.environ, "REDIS_PASSWORD": "compose-test", "JEV_API_KEY": "compose-test"}
    out = subprocess.run(
        [COMPOSE, "config"], cwd=tmp, env=env, check=True, capture_output=True, text=True
    ).stdout
    loaded: dict[str, Any] = yaml.safe_load(out)
    return loaded


def seconds(text: str) -> float:
    return float(text.removesuffix("s"))


def test_each_process_runs_its_documented_command(config: dict[str, Any]) -> None:
    services = config["services"]
    assert services["worker"]["command"] == ["python", "-m", "app", "worker"]
    assert services["migrate"]["command"] == ["alembic", "upgrade", "head"]
    assert services["api"]["command"][:2] == ["uvicorn", "app.main:app"]
    assert services["relay-0"]["command"] == ["python", "-m", "app.relay"]


def test_compose_waits_longer_than_the_worker_and_the_relay_drain(config: dict[str, Any]) -> None:
    services = config["services"]
    drain = Settings.model_fields["worker_drain_grace_s"].default + RELEASE_WAIT_S
    assert seconds(services["worker"]["stop_grace_period"]) > drain
    relay = RelaySettings.model_fields["relay_drain_deadline_s"].default + CLOSE_TIMEOUT_S
    assert seconds(services["relay-0"]["stop_grace_period"]) > relay
