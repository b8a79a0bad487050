"""REDIS_SENTINELS and friends: where the queue lives, read and refused like every setting."""

from __future__ import annotations

import pytest

from app.config import Settings, SettingsError, load_settings
from app.kit.arqueue import redis_client
from app.kit.redis_target import SENTINEL_PORT, RedisTarget, parse_address

BASE = {
    "DATABASE_URL": "postgresql+asyncpg://bot@db/bot",
    "GATEWAY_TOKEN": "target-gateway-token-5b7d9f1a3c2e4068",
}


@pytest.mark.parametrize(
    ("text", "address"),
    [
        ("sentinel-0", ("sentinel-0", SENTINEL_PORT)),
        ("10.0.0.7:26380", ("10.0.0.7", 26380)),
        ("[fd00::7]:26381", ("fd00::7", 26381)),
        (" s.example:1 ", ("s.example", 1)),
    ],
)
def test_a_sentinel_is_a_host_with_an_optional_port(text: str, address: tuple[str, int]) -> None:
    assert parse_address(text, default_port=SENTINEL_PORT) == address


@pytest.mark.parametrize("text", ["host:", "host:0", "host:70000", "host:x1", ":26379", "[::1]x"])
def test_a_malformed_sentinel_is_refused(text: str) -> None:
    with pytest.raises(ValueError):
        parse_address(text, default_port=SENTINEL_PORT)


def test_the_settings_give_the_target_without_showing_the_sentinel_password(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name, value in BASE.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("REDIS_URL", "rediss://:master-pw@ignored:6379/3")
    monkeypatch.setenv("REDIS_SENTINELS", "s0:26379, s1")
    monkeypatch.setenv("REDIS_SENTINEL_MASTER", "queue")
    monkeypatch.setenv("REDIS_SENTINEL_PASSWORD", "sentinel-pw-31f9")
    target = Settings(_env_file=None).redis_target
    assert target.sentinels == (("s0", 26379), ("s1", SENTINEL_PORT))
    assert target.sentinel_master == "queue"
    assert target.sentinel_password == "sentinel-pw-31f9"
    assert "sentinel-pw-31f9" not in repr(target)


def test_without_sentinels_the_target_is_redis_url_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in BASE.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("REDIS_URL", "redis://cache:6379/2")
    assert Settings(_env_file=None).redis_target == RedisTarget(url="redis://cache:6379/2")


def test_a_bad_sentinel_list_names_the_variable(
    monkeypatch: pytest.MonkeyPatch, tmp_path: object
) -> None:
    for name, value in BASE.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("REDIS_SENTINELS", "s0:notaport")
    monkeypatch.chdir(str(tmp_path))  # no .env
    with pytest.raises(SettingsError, match="REDIS_SENTINELS"):
        load_settings()


async def test_the_master_gets_the_urls_credentials_database_and_tls() -> None:
    target = RedisTarget(
        url="rediss://worker:pa%40ss@ignored:1/4", sentinels=(("s0", 26379),), sentinel_master="q"
    )
    client = redis_client(target)
    try:
        options = client.connection_pool.connection_kwargs
        assert (options["username"], options["password"], options["db"]) == ("worker", "pa@ss", 4)
        assert type(client.connection_pool).__name__ == "SentinelConnectionPool"
        assert client.connection_pool.connection_class.__name__ == "SentinelManagedSSLConnection"
    finally:
        await client.aclose()
