"""Logs: one JSON event per line with the turn's ids; no secrets, no memory text at info."""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest
from sqlalchemy import select

from app.chat.fake import Text
from app.config import Settings
from app.db import SessionFactory
from app.decision.vocabulary import Question
from app.kit.logs import JsonFormatter, log_context
from app.models.memory import Memory
from tests.support.frames import message_create
from tests.support.stack import BOT_ID, running_stack

SECRETS = ("test-gateway-token", "test-bot-token", "test-anthropic-key", "fake-token")
MEMORY_TEXT = "Alice keeps three axolotls named after moons."


def _answer(body: dict[str, Any]) -> Text:
    system = " ".join(block["text"] for block in body.get("system", []))
    if "memory note" in system:
        return Text(json.dumps({"subject": "speaker", "fact": MEMORY_TEXT}))
    return Text("Axolotls are wonderful!")


def test_json_formatter_carries_context_fields() -> None:
    with log_context(event_id="42", channel_id=300, turn_id="42"):
        record = logging.getLogger("t").makeRecord("t", logging.INFO, "f", 1, "hello", (), None)
    line = json.loads(JsonFormatter().format(record))
    assert line["event"] == "hello"
    assert (line["event_id"], line["channel_id"], line["turn_id"]) == ("42", 300, "42")


async def test_a_turn_that_writes_a_memory_logs_no_secret_and_no_memory_text(
    settings: Settings,
    sessions: SessionFactory,
    redis: object,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO)
    async with running_stack(settings, monkeypatch) as stack:
        stack.model.responder = _answer
        stack.jev.answers[Question.WORTH_KEEPING] = 0.95
        frame = message_create(content=f"<@{BOT_ID}> I have three axolotls!")
        await stack.deliver(frame)
    async with sessions() as session:
        stored = (await session.scalars(select(Memory.content))).all()
    assert stored == [MEMORY_TEXT]  # the memory really was written during this turn

    formatter = JsonFormatter()
    lines = [formatter.format(r) for r in caplog.records if r.levelno >= logging.INFO]
    assert lines, "the turn logged nothing at info"
    for line in lines:
        json.loads(line)  # one JSON event per line
        assert "axolotl" not in line.lower()
        for secret in SECRETS:
            assert secret not in line
    turn_lines = [json.loads(line) for line in lines if frame["d"]["id"] in line]
    assert any(line.get("turn_id") == frame["d"]["id"] for line in turn_lines)
