"""Relevance recall on real Postgres (store.relevant, store.search, the ranked SQL): all of a
person's memories that may surface here are ranked, ten at most, newest when nothing is
relevant, origin rules kept, and rows written by hand or rewritten by hand are found by
what they say now."""

from __future__ import annotations

from sqlalchemy import text

from app.channel.exchange import DM, Place
from app.db import SessionFactory, unit_of_work
from app.kit.relevance import Query, Ranking, ranked
from app.kit.tokens import tokenize
from app.memory import store
from app.memory.records import Why
from app.models.memory import Memory
from app.vocabulary import Actor
from tests.support.memory_env import add_memory, ledger_rows, read_ids

ALICE, BOB = 11, 22
GUILD, OTHER_GUILD = Place(1), Place(2)
WHY = Why(Actor.REPLY, "recall")
HOBBIES = ["chess", "tennis", "baking", "hiking", "jazz", "pottery", "sailing", "poetry"] * 5


def q(*texts: str) -> Query:
    return Query.of([(t, 1.0) for t in texts])


async def forty_notes(sessions: SessionFactory, *, about: str = "Alice") -> list[int]:
    """39 recent notes about other things, one day apart, newest first."""
    return [
        await add_memory(sessions, ALICE, f"{about} enjoys {HOBBIES[n]} on day {n}", age_days=n + 1)
        for n in range(39)
    ]


async def relevant(
    sessions: SessionFactory, query: Query, place: Place = GUILD, user: int = ALICE
) -> list[str]:
    async with unit_of_work(sessions) as session:
        found = await store.relevant(session, user, WHY, query=query, place=place)
    return [m.content for m in found]


async def test_the_one_note_about_the_cat_comes_back_among_forty(sessions: SessionFactory) -> None:
    await forty_notes(sessions)
    cat = await add_memory(sessions, ALICE, "Alice has a cat named Miso.", age_days=60)

    found = await relevant(sessions, q("how is Miso?"))

    assert "Alice has a cat named Miso." in found and len(found) == 10
    # the other nine are the newest, and the listing is newest first, as recent lists them
    assert found[:9] == [f"Alice enjoys {h} on day {n}" for n, h in enumerate(HOBBIES[:9])]
    [read] = await ledger_rows(sessions)
    assert (read.actor, read.action, read.memory_id) == ("reply", "read", None)
    assert cat in read_ids(read) and len(read_ids(read)) == 10


async def test_a_japanese_question_finds_its_japanese_note(sessions: SessionFactory) -> None:
    await forty_notes(sessions)
    await add_memory(sessions, ALICE, "アリスは毎週土曜日に書道教室に通っている", age_days=90)
    await add_memory(sessions, ALICE, "アリスの好きな食べ物はラーメン", age_days=80)

    found = await relevant(sessions, q("書道はまだ続けてる？"))

    assert "アリスは毎週土曜日に書道教室に通っている" in found
    assert "アリスの好きな食べ物はラーメン" not in found


async def test_nothing_relevant_is_exactly_the_newest_ten(sessions: SessionFactory) -> None:
    await forty_notes(sessions)
    async with unit_of_work(sessions) as session:
        newest = await store.recent(session, ALICE, WHY, place=GUILD)

    assert await relevant(sessions, q("quantum chromodynamics")) == [m.content for m in newest]
    assert await relevant(sessions, q("🎉!!")) == [m.content for m in newest]


async def test_a_word_in_every_note_weighs_nothing(sessions: SessionFactory) -> None:
    await forty_notes(sessions)
    await add_memory(sessions, ALICE, "Alice drinks green tea every morning.", age_days=70)
    async with unit_of_work(sessions) as session:
        newest = await store.recent(session, ALICE, WHY, place=GUILD)

    # "Alice" is in all forty: asking by name alone is asking for nothing in particular.
    assert await relevant(sessions, q("Alice")) == [m.content for m in newest]
    assert "Alice drinks green tea every morning." in await relevant(sessions, q("Alice tea?"))


async def test_a_short_profile_reads_exactly_as_the_ten_newest(sessions: SessionFactory) -> None:
    for n in range(7):
        await add_memory(sessions, ALICE, f"Alice note {n} about topic {n}", age_days=n)
    async with unit_of_work(sessions) as session:
        newest = await store.recent(session, ALICE, WHY, place=GUILD)

    assert await relevant(sessions, q("topic 5")) == [m.content for m in newest]


async def test_origin_rules_hold_however_relevant_a_note_is(sessions: SessionFactory) -> None:
    await forty_notes(sessions)
    async with unit_of_work(sessions) as session:
        for content, place in (
            ("Alice told me in a DM her cat Miso is ill.", DM),
            ("Alice said in another server that Miso is her cat.", OTHER_GUILD),
        ):
            await store.add(session, ALICE, content, Why(Actor.EXTRACTION), learned_in=place)
        await store.add(
            session, BOB, "Bob's cat is also called Miso.", Why(Actor.EXTRACTION), learned_in=GUILD
        )

    here = await relevant(sessions, q("how is Miso?"), GUILD)
    in_dm = await relevant(sessions, q("how is Miso?"), DM)

    assert not any("Miso" in note for note in here)
    assert "Alice told me in a DM her cat Miso is ill." in in_dm
    assert "Alice said in another server that Miso is her cat." in in_dm
    assert not any("Bob" in note for note in in_dm)


async def test_notes_written_or_rewritten_by_hand_are_found_by_what_they_say_now(
    sessions: SessionFactory,
) -> None:
    await forty_notes(sessions)
    old = await add_memory(sessions, ALICE, "Alice is saving up for a kayak.", age_days=50)
    assert "Alice is saving up for a kayak." in await relevant(sessions, q("kayak"))
    async with unit_of_work(sessions) as session:
        await session.execute(
            text("UPDATE memories SET content = 'Alice bought a canoe.' WHERE id = :id"),
            {"id": old},
        )

    async with sessions() as session:
        row = await session.get(Memory, old)
        assert row is not None and row.search_tokens is None  # the trigger cleared them

    assert "Alice bought a canoe." in await relevant(sessions, q("canoe"))
    assert "Alice bought a canoe." not in await relevant(sessions, q("kayak"))
    async with sessions() as session:
        row = await session.get(Memory, old)
        assert row is not None and row.search_tokens == tokenize("Alice bought a canoe.")


async def test_the_store_writes_tokens_with_every_text(sessions: SessionFactory) -> None:
    async with unit_of_work(sessions) as session:
        added = await store.add(session, ALICE, "Alice likes Ｍｉｓｏ soup", WHY, learned_in=GUILD)
        again = await store.rewrite(session, added, "アリスは味噌汁が好き", WHY, learned_in=GUILD)
        assert again is not None
        row = await session.get(Memory, added.id, populate_existing=True)
        assert row is not None and row.search_tokens == tokenize("アリスは味噌汁が好き")


async def test_search_lists_only_matches_best_first_and_logs_one_read(
    sessions: SessionFactory,
) -> None:
    await forty_notes(sessions)
    tea = await add_memory(sessions, ALICE, "Alice drinks green tea; tea is her thing.", age_days=9)
    green = await add_memory(sessions, ALICE, "Alice painted her room green.", age_days=3)

    async with unit_of_work(sessions) as session:
        found = await store.search(session, ALICE, Why(Actor.COMMAND, "search"), q("green tea"))
        none = await store.search(session, ALICE, Why(Actor.COMMAND, "search"), q("sumo"))

    assert [m.id for m in found] == [tea, green]
    assert none == []
    reads = await ledger_rows(sessions)
    assert [(r.actor, r.after) for r in reads] == [("command", [tea, green]), ("command", [])]


async def test_a_rare_word_is_found_beyond_the_statistics_sample(sessions: SessionFactory) -> None:
    """A profile larger than the sample is still searched whole for its rare words."""
    await forty_notes(sessions)
    lost = await add_memory(sessions, ALICE, "Alice once climbed Kilimanjaro.", age_days=400)
    small = Ranking(sample=20, probe_rows=5)

    async with unit_of_work(sessions) as session:
        found = await ranked(
            session,
            store.MEMORIES,
            Memory,
            where="TRUE",
            bind={},
            scope_id=ALICE,
            query=q("Kilimanjaro"),
            ranking=small,
            limit=3,
        )

    (first, relevance), *_ = found
    assert first.id == lost and relevance > 0
