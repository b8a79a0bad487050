"""Logs: one JSON event per line with the turn's ids; no secrets, no memory text at info."""

from __future__ import annotations

import ast
import json
import logging
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select

from app.chat.fake import Text
from app.config import Settings
from app.db import SessionFactory
from app.decision.vocabulary import Question
from app.kit.logs import CONTEXT_ATTR, JsonFormatter, log_context
from app.models.memory import Memory
from tests.support.frames import message_create
from tests.support.stack import BOT_ID, running_stack

SECRETS = (
    "test-gateway-token-3d9f1c7a5b2e8064",
    "test-bot-token",
    "test-anthropic-key",
    "fake-token",
)
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


@pytest.mark.parametrize(
    ("context", "extra", "expected"),
    [
        pytest.param({"channel_id": 1}, {}, {"channel_id": 1}, id="context-only"),
        pytest.param({}, {"channel_id": 2}, {"channel_id": 2}, id="extra-only"),
        pytest.param({"channel_id": 1}, {"channel_id": 2}, {"channel_id": 2}, id="extra-wins"),
        pytest.param(
            {"channel_id": 1, "job": "x"},
            {"channel_id": None, "pin_id": 3},
            {"channel_id": None, "job": "x", "pin_id": 3},
            id="merged",
        ),
    ],
)
def test_context_and_extra_with_the_same_key_merge_with_extra_winning(
    context: dict[str, Any],
    extra: dict[str, Any],
    expected: dict[str, Any],
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="t")
    with log_context(**context):
        logging.getLogger("t").info("both", extra=extra)
    [record] = caplog.records
    line = json.loads(JsonFormatter().format(record))
    assert {key: line[key] for key in expected} == expected


def test_nested_contexts_and_extra_share_every_key(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="t")
    with log_context(job="process_event", channel_id=1, event_id="e"):
        with log_context(channel_id=2, run_id=5):
            logging.getLogger("t").info("inner", extra={"event_id": "x", "run_id": 6})
        logging.getLogger("t").info("outer")
    inner, outer = (json.loads(JsonFormatter().format(r)) for r in caplog.records)
    assert (inner["job"], inner["channel_id"], inner["event_id"], inner["run_id"]) == (
        "process_event",
        2,
        "x",
        6,
    )
    assert (outer["channel_id"], outer["event_id"], "run_id" in outer) == (1, "e", False)


def test_no_log_call_in_app_passes_a_log_record_attribute_in_extra() -> None:
    """`logging` itself refuses these (KeyError), context or not; a static guard over app/."""
    reserved = set(vars(logging.makeLogRecord({}))) | {"message", "asctime", CONTEXT_ATTR}
    clashes = []
    for path in Path("app").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.Call):
                continue
            for keyword in node.keywords:
                if keyword.arg == "extra" and isinstance(keyword.value, ast.Dict):
                    keys = {
                        k.value
                        for k in keyword.value.keys
                        if isinstance(k, ast.Constant) and isinstance(k.value, str)
                    }
                    clashes += [f"{path}:{node.lineno} {key}" for key in keys & reserved]
    assert clashes == []
