"""Nightly extraction works on several speakers at once (NIGHTLY_CONCURRENCY), in waves that
keep each speaker's chunks in order, and a wave cut off midway resumes without redoing the
chunks it committed. Real Postgres, FakeJev and FakeAnthropic over HTTP."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from app.chat.fake import Reply, Text
from app.config import Settings
from app.db import SessionFactory
from app.decision.vocabulary import Question
from app.kit.clock import utcnow
from app.nightly.progress import Chunk
from app.nightly.run import Started, nightly_step, start_nightly_run
from app.nightly.steps import plan_waves
from tests.nightly.test_nightly_run import PERSONA, Night, responder
from tests.support.memory_env import fact, ledger_rows, memories_of, memory_env
from tests.support.waiting import wait_until

SPEAKERS = {11: "Alice", 22: "Bob", 33: "Carol"}


def chunks_of(counts: dict[str, int]) -> list[Chunk]:
    return [
        Chunk(speaker=speaker, index=n, messages=[])
        for speaker, count in counts.items()
        for n in range(count)
    ]


def test_waves_hold_at_most_the_cap_one_chunk_per_speaker_each_speaker_in_order() -> None:
    chunks = chunks_of({"a": 5, "b": 1, "c": 3, "d": 2, "e": 5, "f": 1})

    waves = plan_waves(chunks, 3)

    assert sorted(i for wave in waves for i in wave) == list(range(len(chunks)))
    assert all(len(wave) <= 3 for wave in waves)
    for wave in waves:
        speakers = [chunks[i].speaker for i in wave]
        assert len(speakers) == len(set(speakers))
    for speaker in "abcdef":
        order = [chunks[i].index for wave in waves for i in wave if chunks[i].speaker == speaker]
        assert order == sorted(order)
    assert len(waves) == 6  # 17 chunks in 3 lanes: 6 deep at best (5 + 1, 5 + 1, 3 + 2)


def test_one_lane_is_the_sequential_order() -> None:
    chunks = chunks_of({"a": 2, "b": 3})
    assert plan_waves(chunks, 1) == [[2], [3], [4], [0], [1]]  # busiest speaker first


@pytest.fixture
async def night(
    settings: Settings, sessions: SessionFactory, tmp_path: Path
) -> AsyncIterator[Night]:
    persona = tmp_path / "persona.md"
    persona.write_text(PERSONA, encoding="utf-8")
    local = settings.model_copy(update={"persona_path": str(persona), "nightly_concurrency": 3})
    async with memory_env(local, sessions) as env:
        env.model.responder = responder()
        env.jev.answers[Question.WORTH_KEEPING] = 0.9
        yield Night(env, utcnow())


async def test_three_speakers_are_extracted_at_once(night: Night) -> None:
    together = asyncio.Event()
    writing: list[str] = []

    async def writer(body: dict[str, Any]) -> Reply:
        # Each writer call waits for all three speakers' calls to be in flight.
        name = next(n for n in SPEAKERS.values() if n in str(body))
        writing.append(name)
        if len(writing) == len(SPEAKERS):
            together.set()
        async with asyncio.timeout(5):
            await together.wait()
        return Text(fact(f"{name} likes tea."))

    night.env.model.responder = responder(writer=writer)
    for speaker, name in SPEAKERS.items():
        await night.say(speaker, name, f"I am {name} and I drink tea", hours_ago=2)

    run = await night.run()

    assert run.summary["errors"] == []
    assert sorted(writing) == sorted(SPEAKERS.values())
    for speaker, name in SPEAKERS.items():
        assert list((await memories_of(night.env.sessions, speaker)).values()) == [
            f"{name} likes tea."
        ]


async def test_a_wave_cut_off_midway_resumes_without_redoing_its_committed_chunks(
    night: Night,
) -> None:
    carol_may_answer = asyncio.Event()

    async def writer(body: dict[str, Any]) -> Reply:
        name = next(n for n in SPEAKERS.values() if n in str(body))
        if name == "Carol":
            await carol_may_answer.wait()  # Carol's chunk is in flight when the job dies
        return Text(fact(f"{name} likes tea."))

    night.env.model.responder = responder(writer=writer)
    for speaker, name in SPEAKERS.items():
        await night.say(speaker, name, f"I am {name} and I drink tea", hours_ago=2)
    started = await start_nightly_run(night.env.sessions, night.queue, now=utcnow())
    assert isinstance(started, Started)
    services = night.env.services
    assert await nightly_step(services, started.run_id, "plan") == "extract:0"

    job = asyncio.create_task(nightly_step(services, started.run_id, "extract:0"))

    async def alice_and_bob_committed() -> bool:
        done = [await memories_of(night.env.sessions, s) for s in (11, 22)]
        return all(done)

    await wait_until(alice_and_bob_committed, within=20, what="Alice's and Bob's chunks")
    job.cancel()  # the job dies (a killed worker, a timeout) with Carol's chunk unfinished
    await asyncio.gather(job, return_exceptions=True)
    assert not await memories_of(night.env.sessions, 33)

    carol_may_answer.set()
    # The sweeper's resume: the same step again; once done, a repeat does nothing.
    assert await nightly_step(services, started.run_id, "extract:0") == "retention"
    assert await nightly_step(services, started.run_id, "extract:0") is None

    asked = Counter(
        name
        for body in night.env.jev.asked(Question.WORTH_KEEPING)
        for name in SPEAKERS.values()
        if name in body["prompt"]
    )
    assert asked == {"Alice": 1, "Bob": 1, "Carol": 2}
    adds = Counter(
        row.user_id for row in await ledger_rows(night.env.sessions) if row.action == "add"
    )
    assert adds == {11: 1, 22: 1, 33: 1}
    run = await night.load(started.run_id)
    assert run.status == "running"  # at retention, as nightly_step said
    assert sorted(run.summary["added"]) == sorted(
        [m for s in SPEAKERS for m in await memories_of(night.env.sessions, s)]
    )
