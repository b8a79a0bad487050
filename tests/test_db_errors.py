"""Database errors carry no stored values: neither the bound parameters (hide_parameters) nor
the row or key values Postgres echoes in its DETAIL, in the exception text or a log line."""

from __future__ import annotations

import json
import logging
import traceback
from typing import Any

import httpx
import pytest
from sqlalchemy import text
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncEngine

from app.config import Settings
from app.db import SessionFactory
from app.kit.logs import JsonFormatter
from app.main import create_app
from tests.support.frames import message_create
from tests.support.servers import serve

MARKER = "marker-7f3a91-do-not-log"


def rendered(exc: BaseException) -> str:
    """Everything a log line can show of it: the message and the whole chained traceback."""
    return "".join(traceback.format_exception(exc))


def json_lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    formatter = JsonFormatter()
    return [formatter.format(record) for record in caplog.records]


@pytest.mark.parametrize(
    ("statement", "constraint"),
    [
        pytest.param(
            "INSERT INTO signals (message_id, user_id, kind, value) VALUES (1, 2, :v, :v)",
            "ck_signals_kind",
            id="check-violation",  # DETAIL: Failing row contains (…)
        ),
        pytest.param(
            "INSERT INTO inbox (id, event_type, payload) VALUES (:v, 't', '{}'), (:v, 't', '{}')",
            "pk_inbox",
            id="unique-violation",  # DETAIL: Key (id)=(…) already exists.
        ),
    ],
)
async def test_a_failing_statement_shows_no_bound_or_row_values(
    engine: AsyncEngine,
    sessions: SessionFactory,
    caplog: pytest.LogCaptureFixture,
    statement: str,
    constraint: str,
) -> None:
    with pytest.raises(IntegrityError) as failure:
        async with engine.begin() as conn:
            await conn.execute(text(statement), {"v": MARKER})
    logging.getLogger("t").error("statement failed", exc_info=failure.value)

    assert constraint in str(failure.value)  # still says what went wrong
    assert MARKER not in rendered(failure.value)
    [line] = json_lines(caplog)
    assert constraint in line and MARKER not in line


async def test_an_event_postgres_refuses_is_logged_without_its_content(
    settings: Settings,
    sessions: SessionFactory,
    redis: object,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO)
    body: dict[str, Any] = message_create(content=f"{MARKER} \u0000")
    headers = {"x-discord-gateway-token": settings.gateway_token.get_secret_value()}
    async with serve(create_app(settings)) as api, httpx.AsyncClient(base_url=api) as client:
        response = await client.post("/webhook", content=json.dumps(body), headers=headers)

    assert response.status_code == 422
    assert MARKER not in response.text
    lines = json_lines(caplog)
    assert any("inbox insert failed" in line for line in lines)
    assert not [line for line in lines if MARKER in line]
