"""The relay refuses to start with an unsafe GATEWAY_TOKEN, naming the variable, never its value."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from app.kit.env import MIN_SECRET_CHARS, is_placeholder, weak_secret
from app.relay.settings import RelaySettingsError, load_relay_settings

# Template values an operator might leave in (the relay shares the bot's one rule).
PLACEHOLDERS = ("change-me", "changeit", "replace-me", "password", "secret", "your-token-here")

REPO_ROOT = Path(__file__).resolve().parents[2]
GOOD_TOKEN = "k3J9-q2Lr_7vXw0Zt5Nb8Yc1Hd4Mf6Pa"  # 32 characters, random-looking


@pytest.mark.parametrize("word", PLACEHOLDERS)
def test_every_listed_placeholder_is_refused_in_any_case_and_when_repeated_to_length(
    word: str,
) -> None:
    for value in (word, word.upper(), word.title(), word * 8, f"{word}-" * 8, f"<{word}>"):
        assert is_placeholder(value), value
        assert (weak_secret(value) or "").startswith("is a placeholder")


@pytest.mark.parametrize(
    "value", ["x" * 40, "X" * 64, "0" * 32, "xxxxxxxx-xxxxxxxx-xxxxxxxx-xxxxxxxx"]
)
def test_a_single_character_repeated_is_a_placeholder(value: str) -> None:
    assert weak_secret(value) is not None


def test_empty_and_short_secrets_are_refused_and_a_random_one_is_accepted() -> None:
    assert (weak_secret("") or "").startswith("is empty")
    assert (weak_secret("   ") or "").startswith("is empty")
    short = weak_secret(GOOD_TOKEN[:-1]) or ""
    assert short.startswith(f"is shorter than {MIN_SECRET_CHARS} characters")
    assert weak_secret(GOOD_TOKEN) is None
    assert not is_placeholder("a-test-of-a-real-secret-k3J9q2Lr7vXw")  # contains, is not, "test"


@pytest.mark.parametrize(
    "bad",
    ["", "short-but-not-a-placeholder", "x" * 40, "ChangeMe" * 5, "YOUR-TOKEN-HERE"],
)
def test_python_m_app_relay_exits_non_zero_naming_gateway_token_never_its_value(
    bad: str, tmp_path: Path
) -> None:
    env = {k: v for k, v in os.environ.items() if k in ("PATH", "HOME", "LANG", "TMPDIR")}
    env |= {
        "PYTHONPATH": str(REPO_ROOT),
        "DISCORD_BOT_TOKEN": "relay-settings-test-bot-token",
        "GATEWAY_TOKEN": bad,
        "DISCORD_GATEWAY_URL": "ws://127.0.0.1:9",  # were it to start, nothing answers there
        "RELAY_METRICS_PORT": "0",
    }
    done = subprocess.run(
        [sys.executable, "-m", "app.relay"],
        cwd=tmp_path,  # no .env here
        env=env,
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert done.returncode != 0
    assert "GATEWAY_TOKEN" in done.stderr
    if bad:
        assert bad not in done.stderr + done.stdout
        assert bad.lower() not in (done.stderr + done.stdout).lower()


def test_an_empty_bot_token_counts_as_missing(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("GATEWAY_TOKEN", GOOD_TOKEN)
    monkeypatch.setenv("DISCORD_BOT_TOKEN", "")  # what .env.example ships
    with pytest.raises(RelaySettingsError) as failure:
        load_relay_settings()
    assert "DISCORD_BOT_TOKEN" in str(failure.value)
    assert GOOD_TOKEN not in str(failure.value)
