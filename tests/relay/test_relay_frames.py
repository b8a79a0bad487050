"""Pure relay decisions: what is forwarded, lanes, ids for logs, retry delays, URLs, settings."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from app.frames.events import EventType
from app.relay.frames import (
    HANDLED_TYPES,
    INTENTS,
    NO_CHANNEL,
    backoff_delay,
    channel_key,
    connect_url,
    event_id,
    is_forwarded,
    retry_after_seconds,
    to_frame,
)
from app.relay.settings import RelaySettingsError, load_relay_settings


def test_intents_cover_guilds_messages_reactions_dms_and_message_content() -> None:
    for bit in (0, 9, 10, 12, 13, 15):
        assert INTENTS & (1 << bit)


@pytest.mark.parametrize("t", sorted(HANDLED_TYPES))
def test_handled_dispatch_types_are_forwarded(t: str) -> None:
    assert is_forwarded({"op": 0, "t": t, "s": 1, "d": {}})


@pytest.mark.parametrize(
    "payload",
    [
        {"op": 0, "t": "TYPING_START", "s": 1, "d": {}},
        {"op": 0, "t": "GUILD_CREATE", "s": 1, "d": {}},
        {"op": 0, "t": "READY", "s": 1, "d": {}},
        {"op": 11, "d": None},
        {"op": 7, "t": "MESSAGE_CREATE", "d": None},  # only dispatch frames count
    ],
)
def test_other_frames_are_not_forwarded(payload: dict[str, object]) -> None:
    assert not is_forwarded(payload)


def test_channel_key_is_the_channel_id_or_a_shared_fallback() -> None:
    assert channel_key({"channel_id": "123", "id": "9"}) == "123"
    assert channel_key({"channel_id": 123}) == "123"
    assert channel_key({"id": "9"}) == NO_CHANNEL
    assert channel_key(None) == NO_CHANNEL
    assert channel_key({"channel_id": None}) == NO_CHANNEL
    # A thread's creation or update travels in the lane of the thread's own messages.
    assert channel_key({"id": "77", "parent_id": "300", "type": 11}) == "77"


def test_event_id_names_the_message_for_every_handled_shape() -> None:
    assert event_id({"id": "5", "channel_id": "1"}) == "5"
    assert event_id({"message_id": "6", "user_id": "7", "emoji": {"name": "x"}}) == "6"
    assert event_id({"ids": ["1", "2"], "channel_id": "1"}) == "1,2"
    assert event_id({"ids": [str(i) for i in range(9)]}) == "0,1,2,3,4…"
    assert event_id("not an object") is None


def test_a_frame_keeps_the_exact_bytes_it_arrived_with() -> None:
    raw = '{"op":0, "t":"MESSAGE_DELETE","s":4,"d":{"id":"5","channel_id":"1","x":"\\u00e9"}}'
    frame = to_frame(json.loads(raw), raw)
    assert frame.body == raw.encode()
    assert (frame.t, frame.s, frame.event_id, frame.channel_key) == ("MESSAGE_DELETE", 4, "5", "1")


@given(
    attempt=st.integers(min_value=0, max_value=200),
    base=st.floats(min_value=0.001, max_value=5),
    cap=st.floats(min_value=0.001, max_value=120),
    r=st.floats(min_value=0, max_value=1, exclude_max=True),
)
def test_backoff_is_full_jitter_under_the_exponential_ceiling(
    attempt: int, base: float, cap: float, r: float
) -> None:
    delay = backoff_delay(attempt, base, cap, lambda: r)
    assert 0 <= delay <= min(cap, base * 2.0 ** min(attempt, 30))
    assert delay == pytest.approx(r * min(cap, base * 2.0 ** min(attempt, 30)))


def test_retry_after_is_honoured_in_seconds_capped_and_ignored_when_unreadable() -> None:
    assert retry_after_seconds("2", cap=30) == 2.0
    assert retry_after_seconds(" 0.5 ", cap=30) == 0.5
    assert retry_after_seconds("3600", cap=30) == 30
    assert retry_after_seconds(None, cap=30) is None
    assert retry_after_seconds("Wed, 21 Oct 2015 07:28:00 GMT", cap=30) is None
    assert retry_after_seconds("-1", cap=30) is None
    assert retry_after_seconds("nan", cap=30) is None


def test_connect_url_asks_for_json_without_compression() -> None:
    assert connect_url("wss://gateway.discord.gg") == "wss://gateway.discord.gg/?v=10&encoding=json"
    assert (
        connect_url("wss://gw.example/resume?compress=zlib-stream")
        == "wss://gw.example/resume?v=10&encoding=json"
    )


def test_relay_settings_need_no_database_and_name_missing_variables_without_values(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.chdir(tmp_path)  # no .env here
    for name in ("DATABASE_URL", "DISCORD_BOT_TOKEN", "DISCORD_GATEWAY_URL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("GATEWAY_TOKEN", "secret-hook-token-k3J9q2Lr7vXw0Zt5Nb8Y")
    with pytest.raises(RelaySettingsError) as missing:
        load_relay_settings()
    assert "DISCORD_BOT_TOKEN is required" in str(missing.value)
    assert "secret-hook-token" not in str(missing.value)

    monkeypatch.setenv("DISCORD_BOT_TOKEN", "secret-bot-token")
    monkeypatch.setenv("DISCORD_GATEWAY_URL", "")  # compose passes unset as empty
    settings = load_relay_settings()
    assert settings.discord_gateway_url is None
    assert settings.discord_api_base == "https://discord.com/api/v10"
    assert settings.relay_metrics_port == 9101
    assert "secret" not in repr(settings)


def test_the_relay_forwards_exactly_the_types_the_webhook_handles() -> None:
    assert {t.value for t in EventType} == HANDLED_TYPES


@pytest.mark.parametrize("module", ["app.relay", "app.relay.__main__"])
def test_the_relay_process_imports_nothing_of_the_database_layer(module: str) -> None:
    probe = (
        f"import sys, {module}\n"
        "bad = [m for m in sys.modules if m.startswith(('app.db', 'app.models', 'sqlalchemy',"
        " 'asyncpg', 'app.inbound.store', 'app.inbound.endpoints', 'app.config'))]\n"
        "print(','.join(bad))\n"
        "print('app.frames.events' in sys.modules)"
    )
    repo = Path(__file__).resolve().parents[2]
    done = subprocess.run(
        [sys.executable, "-c", probe],
        cwd=repo,
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    )
    loaded_bad, loaded_event_types = done.stdout.splitlines()
    assert loaded_bad == ""
    if module == "app.relay.__main__":
        assert loaded_event_types == "True"  # the shared list is what the relay runs with
