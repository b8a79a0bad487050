"""MEM-05 on real Postgres: at most MEMORY_EPISODES_PER_CHANNEL episodes per channel; adding
one past the cap drops the oldest, per channel, and consolidation keeps to the cap."""

from __future__ import annotations

from app.config import Settings
from app.db import SessionFactory, unit_of_work
from app.episodes.store import add_episode, recent_episodes
from app.structured.consolidation import consolidate_channel
from tests.support.memory_env import memory_env
from tests.support.obs_env import episodes_of, responder, say
from tests.support.providers import BOTH_PROVIDERS

pytestmark = BOTH_PROVIDERS

CHANNEL, OTHER = 500, 501
ALICE = 11


async def test_mem05_adding_past_the_cap_drops_the_oldest(sessions: SessionFactory) -> None:
    async with unit_of_work(sessions) as session:
        await add_episode(session, OTHER, "other channel's only episode", cap=3, sources=[])
    for n in range(5):
        async with unit_of_work(sessions) as session:
            await add_episode(session, CHANNEL, f"episode {n}", cap=3, sources=[])

    assert await episodes_of(sessions, CHANNEL) == ["episode 2", "episode 3", "episode 4"]
    assert await episodes_of(sessions, OTHER) == ["other channel's only episode"]
    async with sessions() as session:
        newest = await recent_episodes(session, CHANNEL, 2)
    assert [e.content for e in newest] == ["episode 4", "episode 3"]


async def test_mem05_cap_holds_within_one_transaction(sessions: SessionFactory) -> None:
    """Rows added in one transaction share created_at; the id still orders them."""
    async with unit_of_work(sessions) as session:
        for n in range(4):
            await add_episode(session, CHANNEL, f"episode {n}", cap=2, sources=[])

    assert await episodes_of(sessions, CHANNEL) == ["episode 2", "episode 3"]


async def test_mem05_consolidation_keeps_the_cap(
    settings: Settings, sessions: SessionFactory
) -> None:
    capped = settings.model_copy(update={"memory_episodes_per_channel": 2})
    async with memory_env(capped, sessions) as env:
        for n in range(3):
            await say(
                sessions,
                id=n + 1,
                channel_id=CHANNEL,
                author_id=ALICE,
                author_name="Alice",
                content=f"message {n}",
            )
            env.model.responder = responder(f"summary {n}", lambda _: "{}")
            outcome = await consolidate_channel(env.services, CHANNEL)
            assert outcome.status == "done"

    assert await episodes_of(sessions, CHANNEL) == ["summary 1", "summary 2"]
