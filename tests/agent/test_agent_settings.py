"""The sandbox block of the settings: the local backend's unsafe flag, network, cap."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.config import SandboxBackend, SettingsError, load_settings

REQUIRED = {
    "DATABASE_URL": "postgresql+asyncpg://u:db-password-123@h/db",
    "GATEWAY_TOKEN": "gateway-secret-456-k3J9q2Lr7vXw0Zt5Nb8Yc1",
}


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for name in (
        "SANDBOX_BACKEND",
        "SANDBOX_LOCAL_UNSAFE",
        "SANDBOX_NETWORK",
        "SANDBOX_MAX_CONTAINERS",
        "SANDBOX_ROOT",
    ):
        monkeypatch.delenv(name, raising=False)
    for name, value in REQUIRED.items():
        monkeypatch.setenv(name, value)
    monkeypatch.chdir(tmp_path)  # no stray .env


def test_defaults_are_no_sandbox_no_network_and_a_small_cap() -> None:
    settings = load_settings()

    assert settings.sandbox_backend is SandboxBackend.NONE
    assert settings.sandbox_local_unsafe is False
    assert settings.sandbox_network == "none"
    assert settings.sandbox_max_containers == 4


def test_the_local_backend_alone_is_refused_naming_the_flag_without_values(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("SANDBOX_BACKEND", "local")
    monkeypatch.setenv("SANDBOX_ROOT", "/srv/private-root-789")

    with pytest.raises(SettingsError) as failure:
        load_settings()

    message = str(failure.value)
    assert "SANDBOX_LOCAL_UNSAFE" in message
    for value in ("db-password-123", "gateway-secret-456-k3J9", "private-root-789"):
        assert value not in message


@pytest.mark.parametrize("flag", ["false", "0", "no"])
def test_a_false_flag_is_refused_too(monkeypatch: pytest.MonkeyPatch, flag: str) -> None:
    monkeypatch.setenv("SANDBOX_BACKEND", "local")
    monkeypatch.setenv("SANDBOX_LOCAL_UNSAFE", flag)

    with pytest.raises(SettingsError, match="SANDBOX_LOCAL_UNSAFE"):
        load_settings()


def test_the_local_backend_with_the_flag_loads(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SANDBOX_BACKEND", "local")
    monkeypatch.setenv("SANDBOX_LOCAL_UNSAFE", "true")

    settings = load_settings()

    assert settings.sandbox_backend is SandboxBackend.LOCAL
    assert settings.sandbox_local_unsafe is True


@pytest.mark.parametrize("backend", ["docker", "none"])
def test_the_flag_is_not_needed_for_other_backends(
    monkeypatch: pytest.MonkeyPatch, backend: str
) -> None:
    monkeypatch.setenv("SANDBOX_BACKEND", backend)

    assert load_settings().sandbox_backend == backend


@pytest.mark.parametrize("network", ["none", "bridge", "sandbox_egress", "egress-net.1"])
def test_network_names_are_accepted(monkeypatch: pytest.MonkeyPatch, network: str) -> None:
    monkeypatch.setenv("SANDBOX_NETWORK", network)

    assert load_settings().sandbox_network == network


@pytest.mark.parametrize(
    "network", ["host", "container:secret-box-42", "", "-bad", "net work", "netz/secret-box-42"]
)
def test_host_and_odd_network_values_are_refused_without_echoing_them(
    monkeypatch: pytest.MonkeyPatch, network: str
) -> None:
    monkeypatch.setenv("SANDBOX_NETWORK", network)

    with pytest.raises(SettingsError) as failure:
        load_settings()

    message = str(failure.value)
    assert "SANDBOX_NETWORK" in message
    assert "secret-box-42" not in message


@pytest.mark.parametrize("cap", ["0", "-1", "many"])
def test_the_cap_must_be_a_positive_number(monkeypatch: pytest.MonkeyPatch, cap: str) -> None:
    monkeypatch.setenv("SANDBOX_MAX_CONTAINERS", cap)

    with pytest.raises(SettingsError, match="SANDBOX_MAX_CONTAINERS"):
        load_settings()
