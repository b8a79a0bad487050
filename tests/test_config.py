"""Settings: required variables named on failure, lists parsed, memory off without a decider."""

from __future__ import annotations

import pytest

from app.config import SettingsError, load_settings

REQUIRED = {
    "DATABASE_URL": "postgresql+asyncpg://u@h/db",
    "GATEWAY_TOKEN": "secret-token",
}


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: object) -> None:
    for name in ("DATABASE_URL", "GATEWAY_TOKEN", "JEV_URL", "ANTHROPIC_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.chdir(tmp_path)  # no stray .env


def test_missing_required_variables_are_named(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(SettingsError) as failure:
        load_settings()
    assert "DATABASE_URL is required" in str(failure.value)
    assert "GATEWAY_TOKEN is required" in str(failure.value)


def test_invalid_values_are_named_without_echoing_secrets(monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in REQUIRED.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("DATABASE_URL", "postgres://user:hunter2@h/db")
    monkeypatch.setenv("MEMORY_RECALL_SCOPE", "everyone")
    with pytest.raises(SettingsError) as failure:
        load_settings()
    message = str(failure.value)
    assert "DATABASE_URL" in message and "MEMORY_RECALL_SCOPE" in message
    assert "hunter2" not in message


def test_lists_and_blank_optionals(monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in REQUIRED.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("STAFF_USER_IDS", "1, 2,,3")
    monkeypatch.setenv("REACTION_EMOJIS", "🎉,❤️")
    monkeypatch.setenv("MEMORY_RETENTION_DAYS", "")
    monkeypatch.setenv("ADMIN_SECRET", "")
    settings = load_settings()
    assert settings.staff_user_ids == [1, 2, 3]
    assert settings.reaction_emojis == ["🎉", "❤️", "👍"]  # 👍 is the fallback, always there
    assert settings.memory_retention_days is None
    assert settings.admin_secret is None
    assert "secret-token" not in repr(settings)


@pytest.mark.parametrize(
    ("extra", "active"),
    [
        ({}, False),  # MEM-10: no decision model configured
        ({"JEV_URL": "http://jev:8001"}, True),
        ({"ANTHROPIC_API_KEY": "k"}, True),
        ({"ANTHROPIC_API_KEY": "k", "MEMORY_ENABLED": "false"}, False),
    ],
)
def test_mem10_memory_runs_only_with_a_decision_model_and_enabled(
    monkeypatch: pytest.MonkeyPatch, extra: dict[str, str], active: bool
) -> None:
    for name, value in {**REQUIRED, **extra}.items():
        monkeypatch.setenv(name, value)
    assert load_settings().memory_active is active
