"""The nightly run on the whole stack: our API app starts it, real ARQ workers run its steps
(two racing each other), the admin API reports and rolls it back."""

from __future__ import annotations

import asyncio
import json
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from redis.asyncio import Redis

from app.chat.fake import Reply, Text
from app.config import Settings
from app.db import SessionFactory
from app.decision.vocabulary import Question
from app.kit.clock import utcnow
from app.nightly.diary import DIARY_SYSTEM
from tests.support.memory_env import add_message, memories_of
from tests.support.providers import BOTH_PROVIDERS
from tests.support.stack import running_stack
from tests.support.worker import drain

pytestmark = BOTH_PROVIDERS

AUTH = {"Authorization": "Bearer test-admin-secret-8c2e4a6f1d3b5907"}
ALICE, BOB = 11, 22


def answer(body: dict[str, Any]) -> Reply:
    system = "".join(block["text"] for block in body.get("system") or [])
    if system == DIARY_SYSTEM:
        return Text("今日はアリスが大阪に引っ越した話をした。")
    name = "Alice" if "Alice" in system else "Bob"
    return Text(json.dumps({"subject": "speaker", "fact": f"{name} shared a plan."}))


async def test_a_night_on_real_workers_is_reported_and_rolled_back(
    settings: Settings,
    sessions: SessionFactory,
    redis: Redis,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    persona = tmp_path / "persona.md"
    persona.write_text("## Core\n\nTsumugi.\n\n## Style\n\nShort.\n", encoding="utf-8")
    async with running_stack(settings, monkeypatch, persona_path=str(persona)) as stack:
        stack.jev.answers[Question.WORTH_KEEPING] = 0.9
        stack.model.responder = answer
        for n, (who, name) in enumerate([(ALICE, "Alice"), (BOB, "Bob")] * 4):
            await add_message(
                sessions,
                id=100 + n,
                channel_id=5,
                author_id=who,
                author_name=name,
                content=f"{name} plans a trip, part {n}",
                at=utcnow() - timedelta(hours=3 - n / 10),
            )
        async with httpx.AsyncClient(base_url=stack.api, headers=AUTH) as api:
            starts = await asyncio.gather(*(api.post("/nightly/run") for _ in range(2)))
            assert sorted(r.status_code for r in starts) == [202, 409]
            run_id = next(r.json()["runId"] for r in starts if r.status_code == 202)

            # Two workers race for the chain's jobs; each step still happens once.
            await asyncio.gather(drain(stack.settings), drain(stack.settings))

            run = (await api.get(f"/nightly/runs/{run_id}")).json()
            undo = await api.post("/memory/rollback", json={"runId": run_id})
            again = await api.post("/memory/rollback", json={"runId": run_id})

    assert run["status"] == "finished", run
    assert run["diary"] == "今日はアリスが大阪に引っ越した話をした。"
    summary = run["summary"]
    assert len(summary["added"]) == 2 and summary["errors"] == []
    assert summary["decisionCalls"] == len(stack.jev.requests)
    assert summary["modelCalls"] == len(stack.model.requests) == 3  # two notes, one diary
    assert undo.status_code == 200 and sorted(undo.json()["deleted"]) == sorted(summary["added"])
    assert again.status_code == 409 and again.json() == {"alreadyRolledBack": True, "runId": run_id}
    assert await memories_of(sessions, ALICE) == {} == await memories_of(sessions, BOB)
