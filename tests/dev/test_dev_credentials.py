"""The dev stack's generated secrets, and what the production app does not serve."""

from __future__ import annotations

import json
import secrets
import stat
from pathlib import Path

import httpx
import pytest

from app.config import Settings
from app.dev.credentials import SecretsUnreadable, load_or_create
from app.dev.playground import (
    SESSION_COOKIE,
    TOKEN_HEADER,
    Access,
    Feed,
    PageConfig,
    World,
    accepted_frame,
    playground_app,
)
from app.main import create_app


def test_secrets_are_created_owner_only_and_reused(tmp_path: Path) -> None:
    first = load_or_create(tmp_path)
    path = tmp_path / "secrets.json"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert len({first.gateway_token, first.admin_secret, first.discord_bot_token}) == 3
    assert all(len(value) >= 32 for value in json.loads(path.read_text()).values())
    assert load_or_create(tmp_path) == first
    assert first.admin_secret not in repr(first)


def test_a_missing_or_short_secret_is_replaced_and_the_rest_kept(tmp_path: Path) -> None:
    first = load_or_create(tmp_path)
    stored = json.loads((tmp_path / "secrets.json").read_text())
    stored["admin_secret"] = "short"
    del stored["jev_api_key"]
    (tmp_path / "secrets.json").write_text(json.dumps(stored))
    second = load_or_create(tmp_path)
    assert second.gateway_token == first.gateway_token
    assert len(second.admin_secret) >= 32 and second.admin_secret != "short"
    assert len(second.jev_api_key) >= 32


def test_an_unreadable_secrets_file_is_reported_not_overwritten(tmp_path: Path) -> None:
    (tmp_path / "secrets.json").write_text("{not json")
    with pytest.raises(SecretsUnreadable):
        load_or_create(tmp_path)
    assert (tmp_path / "secrets.json").read_text() == "{not json"


def test_only_first_deliveries_join_the_playground_feed() -> None:
    frame = b'{"op": 0, "t": "MESSAGE_DELETE", "s": 3, "d": {"id": "1", "channel_id": "2"}}'
    assert accepted_frame(frame, b'{"status": "ok"}') == {
        "t": "MESSAGE_DELETE",
        "d": {"id": "1", "channel_id": "2"},
    }
    assert accepted_frame(frame, b'{"status": "duplicate"}') is None
    assert accepted_frame(b"not json", b'{"status": "ok"}') is None


async def test_the_production_app_serves_no_playground_and_no_fake_discord() -> None:
    settings = Settings(
        database_url="postgresql+asyncpg://nobody@127.0.0.1:1/none",
        gateway_token=secrets.token_hex(32),
        _env_file=None,
    )
    transport = httpx.ASGITransport(app=create_app(settings))  # routing only: no lifespan
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
        for path in ("/playground", "/playground/config.json", "/_discord/api/v10/users/@me"):
            assert (await client.get(path)).status_code == 404, path


def page_app(access: Access) -> httpx.AsyncClient:
    config = PageConfig(
        World(), gateway_token="g" * 64, admin_secret="a" * 64, models="demo", models_note=""
    )
    app = playground_app(config, Feed(), access)
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1")


async def test_the_page_config_goes_once_to_the_printed_token_then_to_its_cookie() -> None:
    access = Access()
    async with page_app(access) as client:
        nothing = await client.get("/playground/config.json")
        wrong = await client.get("/playground/config.json", headers={TOKEN_HEADER: "guess"})
        first = await client.get("/playground/config.json", headers={TOKEN_HEADER: access.token})
        client.cookies.clear()
        again = await client.get("/playground/config.json", headers={TOKEN_HEADER: access.token})
        session = {"cookie": f"{SESSION_COOKIE}={first.cookies[SESSION_COOKIE]}"}
        later = await client.get("/playground/config.json", headers=session)

    assert [nothing.status_code, wrong.status_code, again.status_code] == [403, 403, 403]
    assert all("a" * 64 not in r.text and "g" * 64 not in r.text for r in (nothing, wrong, again))
    assert first.status_code == 200 and first.json()["adminSecret"] == "a" * 64
    cookie = first.headers["set-cookie"].lower()
    assert "httponly" in cookie and "samesite=strict" in cookie and "path=/playground" in cookie
    assert later.status_code == 200 and later.json()["gatewayToken"] == "g" * 64


async def test_the_feed_and_uploads_need_the_session_too() -> None:
    async with page_app(Access()) as client:
        feed = await client.get("/playground/events")
        upload = await client.post("/playground/attachments", content=b"hello")
        page = await client.get("/playground")

    assert (feed.status_code, upload.status_code) == (403, 403)
    assert page.status_code == 200  # the page itself holds no secret; it says how to sign in
