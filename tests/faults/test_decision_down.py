"""The decision service down (503, unreachable, or slower than JEV_TIMEOUT_S): every question
goes unanswered, so the turn takes the conservative branch — react 👍, write the reply, and
change no memory (SPEC invariant 2), even though a working Jev would have said otherwise."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest
from sqlalchemy import text

from app.config import Settings
from app.db import SessionFactory
from app.decision.fake import FakeJev
from app.decision.vocabulary import Question
from app.turn.pipeline import FALLBACK_EMOJI
from tests.faults.harness import Tally, count_outcomes
from tests.support.frames import message_create
from tests.support.servers import free_port
from tests.support.stack import BOT_ID, running_stack
from tests.support.worker import drain

pytestmark = pytest.mark.faults

MODEL_TEXT = "Hello from the model!"
JEV_TIMEOUT_S = 0.2


@dataclass(frozen=True)
class Case:
    injected: str
    down: bool = False
    latency: float = 0.0
    overrides: dict[str, Any] = field(default_factory=dict)


CASES = {
    "503": Case("Jev answers 503 to everything", down=True),
    "unreachable": Case("JEV_URL points at a closed port", overrides={"jev_url": ""}),
    "timeout": Case(
        f"Jev answers after 1 s, JEV_TIMEOUT_S={JEV_TIMEOUT_S}",
        latency=1.0,
        overrides={"jev_timeout_s": JEV_TIMEOUT_S},
    ),
}


def _would_write(jev: FakeJev) -> None:
    """Answers that, were they delivered, would mean: emoji only (no reply), 🎉, remember."""
    jev.answers[Question.EMOJI_ENOUGH] = True
    jev.answers[Question.EMOJI_CHOICE] = "🎉"
    jev.answers[Question.WORTH_KEEPING] = 0.99
    jev.answers[Question.ADD_MEMORY] = 0.99


async def _memory_changes(sessions: SessionFactory) -> int:
    async with sessions() as session:
        changes = await session.scalar(
            text("SELECT count(*) FROM memory_log WHERE action IN ('add', 'update', 'delete')")
        )
        memories = await session.scalar(text("SELECT count(*) FROM memories"))
    return int(changes or 0) + int(memories or 0)


@pytest.mark.parametrize("name", list(CASES))
async def test_decision_service_down_takes_the_conservative_branch(
    name: str,
    fault_settings: Settings,
    fault_sessions: SessionFactory,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    case = CASES[name]
    overrides = dict(case.overrides)
    if "jev_url" in overrides:
        overrides["jev_url"] = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    tally = Tally(f"decision service {name}", injected=[case.injected])
    async with running_stack(fault_settings, monkeypatch, **overrides) as stack:
        _would_write(stack.jev)
        stack.jev.down, stack.jev.latency = case.down, case.latency
        frame = message_create(content=f"<@{BOT_ID}> I love hiking in the Alps, remember that")
        message_id = int(frame["d"]["id"])
        body = await stack.post(frame)
        tally.sent, tally.acknowledged = 1, int(body["status"] == "ok")
        worker = await drain(stack.settings)

        await count_outcomes(tally, fault_sessions, stack.discord, [message_id], {message_id})
        changes = await _memory_changes(fault_sessions)
        tally.extra["jev_requests"] = len(stack.jev.requests)
        tally.extra["jobs_run"] = worker.jobs_complete
        tally.extra["memory_changes"] = changes
        tally.report()

    assert stack.discord.reactions_on(message_id) == [FALLBACK_EMOJI]
    assert [m["content"] for m in stack.discord.posted] == [MODEL_TEXT]
    assert changes == 0
    # The turn and the memory job after it both ran (and asked, where Jev could hear).
    assert worker.jobs_complete >= 2 and worker.jobs_failed == 0
    if name != "unreachable":
        assert stack.jev.asked(Question.WORTH_KEEPING)
    assert tally.duplicated == 0
    assert tally.lost == 0
