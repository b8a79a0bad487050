"""Embeddings are paid for like model calls, through the real webhook, worker and Postgres with
a fake embeddings API on the real wire format: a turn's query and its memory's vectors are the
speaker's, in her guild; the worker's back-fill is nobody's; each with the tokens the answers
reported (estimated when an answer reports none)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from sqlalchemy import select

from app.config import InputType, MemoryRecall
from app.db import SessionFactory
from app.embeddings.client import DIMENSION_CHECK
from app.embeddings.fake import FakeEmbeddings
from app.kit.spend import estimate_tokens
from app.models.usage import ModelUsage
from app.usage.store import NONE
from app.worker import embed_backlog
from tests.support.embeddings import fake_settings
from tests.support.slash import slash_world
from tests.support.trust_env import ALICE, CHANNEL_A, GUILD_A, World, WorldWith
from tests.support.worker import started_worker

# (guild, person, purpose) -> (calls, input tokens, calls whose tokens are estimated)
Rows = dict[tuple[int | None, int | None, str], tuple[int, int, int]]


@pytest.fixture
async def world(
    world_with: WorldWith, fake_embeddings: tuple[FakeEmbeddings, str]
) -> AsyncIterator[World]:
    async with world_with(
        memory_recall=MemoryRecall.RELEVANT,
        # Each request says whether it embeds a query or stored texts.
        embeddings_input_type=InputType.FIELD,
        **fake_settings(*fake_embeddings),
    ) as running:
        yield running


def served(fake: FakeEmbeddings, since: int = 0) -> dict[str, tuple[int, int, int]]:
    """What the fake answered from request ``since`` on, by purpose: calls and the tokens its
    answers reported (or, with ``reports_usage`` off, what the bot estimates)."""
    found: dict[str, tuple[int, int, int]] = {}
    for body in fake.requests[since:]:
        texts = list(body["input"])
        if texts == [DIMENSION_CHECK]:
            continue  # each process's start-up check: no job's, in no usage row
        if fake.reports_usage:
            tokens, estimated = fake.tokens(texts), 0
        else:
            tokens, estimated = sum(estimate_tokens(t) for t in texts), 1
        calls, total, guessed = found.get(f"embedding_{body['input_type']}", (0, 0, 0))
        found[f"embedding_{body['input_type']}"] = (calls + 1, total + tokens, guessed + estimated)
    return found


async def embedding_rows(sessions: SessionFactory) -> Rows:
    async with sessions() as session:
        rows = await session.execute(
            select(
                ModelUsage.guild_id,
                ModelUsage.user_id,
                ModelUsage.purpose,
                ModelUsage.calls,
                ModelUsage.input_tokens,
                ModelUsage.output_tokens,
                ModelUsage.estimated_calls,
            ).where(ModelUsage.purpose.like("embedding%"))
        )
    found: Rows = {}
    for guild, person, purpose, calls, tokens, output, estimated in rows:
        assert output == 0  # an embedding has no output tokens
        key = (None if guild == NONE else guild, None if person == NONE else person, purpose)
        found[key] = (calls, tokens, estimated)
    return found


@pytest.mark.parametrize("reports_usage", [True, False], ids=["reported", "estimated"])
async def test_a_turns_embeddings_are_the_speakers_and_the_back_fills_nobodys(
    world: World,
    sessions: SessionFactory,
    fake_embeddings: tuple[FakeEmbeddings, str],
    reports_usage: bool,
) -> None:
    embeddings = fake_embeddings[0]
    embeddings.reports_usage = reports_usage
    await world.tell(ALICE, "I keep bees on the roof of my flat")
    turn = served(embeddings)
    assert set(turn) == {"embedding_query", "embedding_document"}  # her query, her memory
    hers: Rows = {(GUILD_A, ALICE, purpose): spent for purpose, spent in turn.items()}
    assert await embedding_rows(sessions) == hers

    before = len(embeddings.requests)
    async with started_worker(world.stack.settings) as ctx:
        await embed_backlog(ctx)  # the worker's minute job, with the services it started
    upkeep = served(embeddings, since=before)
    assert set(upkeep) == {"embedding_document"}  # the messages' vectors
    nobodys: Rows = {(None, None, "embedding_document"): upkeep["embedding_document"]}
    assert await embedding_rows(sessions) == hers | nobodys


async def test_a_slash_searchs_query_is_paid_for_by_its_user_as_a_typed_ones_is(
    world: World, sessions: SessionFactory, fake_embeddings: tuple[FakeEmbeddings, str]
) -> None:
    async with slash_world(world.stack) as slash:
        used = await slash.use("/memory search", {"words": "bees"}, user=ALICE, guild=GUILD_A)
        await slash.answer_of(used)
    await world.tell(ALICE, "!memory search bees", mention=False)

    searched = served(fake_embeddings[0])["embedding_query"]
    assert searched[0] == 2  # one query each way
    assert await embedding_rows(sessions) == {(GUILD_A, ALICE, "embedding_query"): searched}


async def test_a_failed_embeddings_call_is_counted_with_no_tokens(
    world: World, sessions: SessionFactory, fake_embeddings: tuple[FakeEmbeddings, str]
) -> None:
    fake_embeddings[0].down = True
    await world.tell(ALICE, "how are the bees?")

    rows = await embedding_rows(sessions)
    assert rows[(GUILD_A, ALICE, "embedding_query")] == (1, 0, 0)  # asked once, answered 503
    assert world.stack.discord.messages_in(CHANNEL_A)  # and the turn answered, by words
