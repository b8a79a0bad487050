"""Settings: required variables named on failure, lists parsed, memory off without a decider."""

from __future__ import annotations

import secrets as secrets_module
from pathlib import Path

import pytest

from app.config import MemoryRecall, SettingsError, load_settings
from app.dev.credentials import DevSecrets
from app.dev.playground import World
from app.dev.stack import _settings

REQUIRED = {
    "DATABASE_URL": "postgresql+asyncpg://u@h/db",
    "GATEWAY_TOKEN": "config-test-token-9a8b7c6d5e4f3a2b1c0d",
}


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for name in (
        "DATABASE_URL",
        "GATEWAY_TOKEN",
        "GATEWAY_TOKEN_PREVIOUS",
        "ADMIN_SECRET",
        "TASKS_PER_USER_PER_HOUR",
        "JEV_URL",
        "JEV_API_KEY",
        "ANTHROPIC_API_KEY",
        "MEMORY_ENABLED",
        "MEMORY_RECALL",
        "MEMORY_RECALL_MESSAGES",
    ):
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
    assert "config-test-token-9a8b7c6d5e4f3a2b1c0d" not in repr(settings)


@pytest.mark.parametrize(
    ("extra", "active"),
    [
        ({}, False),  # MEM-10: no decision model configured
        ({"JEV_URL": "http://jev:8001", "JEV_API_KEY": "k"}, True),
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


STRONG = "k7Qx2vN9pLm4Rt8Wz1Bc6Yd3Fg5Hj0Ks-Ua"  # 35 characters, as token_urlsafe makes them


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        pytest.param("   ", "is empty", id="blank"),
        pytest.param("change-me", "is a placeholder", id="change-me"),
        pytest.param("ChangeMe", "is a placeholder", id="changeme-any-case"),
        pytest.param("PASSWORD", "is a placeholder", id="password"),
        pytest.param("test", "is a placeholder", id="test"),
        pytest.param("change-me-" * 4, "is a placeholder", id="long-placeholder"),
        pytest.param("secret" * 6, "is a placeholder", id="repeated-word"),
        pytest.param("x" * 40, "is a placeholder", id="one-character"),
        pytest.param("replace-me-with-a-real-gateway-token", "is a placeholder", id="template"),
        pytest.param(STRONG[:31], "is shorter than 32 characters", id="31-characters"),
    ],
)
def test_a_weak_gateway_token_is_refused_by_name_without_its_value(
    monkeypatch: pytest.MonkeyPatch, value: str, reason: str
) -> None:
    for name, good in REQUIRED.items():
        monkeypatch.setenv(name, good)
    monkeypatch.setenv("GATEWAY_TOKEN", value)
    with pytest.raises(SettingsError) as failure:
        load_settings()
    assert f"GATEWAY_TOKEN {reason}" in str(failure.value)
    assert not value.strip() or value not in str(failure.value)


def test_an_admin_secret_that_is_set_must_be_32_characters(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name, value in REQUIRED.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("ADMIN_SECRET", STRONG[:20])
    with pytest.raises(SettingsError) as failure:
        load_settings()
    assert "ADMIN_SECRET is shorter than 32 characters" in str(failure.value)
    assert STRONG[:20] not in str(failure.value)

    monkeypatch.setenv("ADMIN_SECRET", STRONG)
    monkeypatch.setenv("GATEWAY_TOKEN", STRONG[::-1])
    settings = load_settings()
    assert settings.admin_secret is not None and len(settings.admin_secret) == len(STRONG)


def test_jev_url_without_jev_api_key_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in REQUIRED.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("JEV_URL", "http://jev:8001")
    monkeypatch.delenv("JEV_API_KEY", raising=False)
    with pytest.raises(SettingsError) as failure:
        load_settings()
    assert "JEV_URL is set without JEV_API_KEY" in str(failure.value)

    monkeypatch.setenv("JEV_API_KEY", "jev-key")
    assert load_settings().jev_api_key is not None


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        pytest.param("change-me", "is a placeholder", id="placeholder"),
        pytest.param(STRONG[:31], "is shorter than 32 characters", id="31-characters"),
    ],
)
def test_a_weak_previous_gateway_token_is_refused_by_name_without_its_value(
    monkeypatch: pytest.MonkeyPatch, value: str, reason: str
) -> None:
    for name, good in REQUIRED.items():
        monkeypatch.setenv(name, good)
    monkeypatch.setenv("GATEWAY_TOKEN_PREVIOUS", value)
    with pytest.raises(SettingsError) as failure:
        load_settings()
    assert f"GATEWAY_TOKEN_PREVIOUS {reason}" in str(failure.value)
    assert value not in str(failure.value)


def test_the_previous_gateway_token_is_optional_and_blank_is_unset(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name, good in REQUIRED.items():
        monkeypatch.setenv(name, good)
    assert load_settings().gateway_token_previous is None
    monkeypatch.setenv("GATEWAY_TOKEN_PREVIOUS", "")
    assert load_settings().gateway_token_previous is None
    monkeypatch.setenv("GATEWAY_TOKEN_PREVIOUS", STRONG)
    previous = load_settings().gateway_token_previous
    assert previous is not None and previous.get_secret_value() == STRONG


def test_tasks_per_user_per_hour_defaults_to_ten_and_must_be_positive(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name, good in REQUIRED.items():
        monkeypatch.setenv(name, good)
    assert load_settings().tasks_per_user_per_hour == 10
    monkeypatch.setenv("TASKS_PER_USER_PER_HOUR", "0")
    with pytest.raises(SettingsError) as failure:
        load_settings()
    assert "TASKS_PER_USER_PER_HOUR" in str(failure.value)


def test_recall_is_recent_by_default_and_relevant_only_with_memory_on(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name, value in {**REQUIRED, "ANTHROPIC_API_KEY": "k"}.items():
        monkeypatch.setenv(name, value)
    seed = load_settings()
    assert (seed.memory_recall, seed.memory_recall_messages) == (MemoryRecall.RECENT, 10)
    assert not seed.recall_relevant
    monkeypatch.setenv("MEMORY_RECALL", "relevant")
    monkeypatch.setenv("MEMORY_RECALL_MESSAGES", "0")
    assert load_settings().recall_relevant and load_settings().memory_recall_messages == 0
    monkeypatch.setenv("MEMORY_ENABLED", "false")
    assert not load_settings().recall_relevant  # MEM-10: memory off is no recall at all
    for name, bad in (("MEMORY_RECALL", "everything"), ("MEMORY_RECALL_MESSAGES", "-1")):
        monkeypatch.setenv(name, bad)
        with pytest.raises(SettingsError, match=name):
            load_settings()
        monkeypatch.setenv(name, {"MEMORY_RECALL": "recent", "MEMORY_RECALL_MESSAGES": "10"}[name])


def test_the_shipped_configurations_turn_relevance_recall_on() -> None:
    root = Path(__file__).resolve().parents[1]
    assert "\nMEMORY_RECALL=relevant\n" in (root / ".env.example").read_text()
    assert "MEMORY_RECALL: ${MEMORY_RECALL:-relevant}" in (root / "docker-compose.yml").read_text()


def test_the_local_stack_ships_relevance_recall_unless_told_otherwise(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    secrets = DevSecrets(*(secrets_module.token_urlsafe(32) for _ in range(4)))
    urls = {"database_url": REQUIRED["DATABASE_URL"], "redis_url": "redis://x/0"}
    assert _settings(secrets, World(), **urls).memory_recall is MemoryRecall.RELEVANT
    monkeypatch.setenv("MEMORY_RECALL", "recent")
    assert _settings(secrets, World(), **urls).memory_recall is MemoryRecall.RECENT
