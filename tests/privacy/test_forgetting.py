"""Forgetting that holds, through the real webhook, worker, admin API and database: no
rollback brings back what a person (or staff, or retention) removed, even racing it; ledger
content retention refuses old rollbacks; decay reviews every stale memory in turn; and an
erasure leaves no trace of the person in any table."""

from __future__ import annotations

import asyncio
import json
from datetime import timedelta
from typing import Any

import httpx
import pytest
from sqlalchemy import select, text

from app.chat.fake import Text
from app.config import MemoryRecall, Settings
from app.db import SessionFactory
from app.decision.vocabulary import Question
from app.embeddings.fake import FakeEmbeddings
from app.kit.arqueue import create_queue
from app.kit.clock import utcnow
from app.memory.ledger_retention import redact_old_ledger_content
from app.models import Base
from app.models.memory import Memory, MemoryLog
from app.nightly.diary import DIARY_SYSTEM
from app.nightly.run import Started, start_nightly_run
from app.nightly.style import STYLE_SYSTEM
from app.structured.consolidation import EPISODE_SYSTEM
from app.vocabulary import SkipReason
from tests.support.embeddings import backfill_now, fake_settings
from tests.support.frames import frame, message_create, next_id, reaction_add
from tests.support.memory_env import add_memory, add_message
from tests.support.samples import sampled
from tests.support.servers import serve
from tests.support.slash import register
from tests.support.stack import BOT_ID
from tests.support.trust_env import (
    ADMIN,
    ALICE,
    BOB,
    CHANNEL_A,
    DM_CHANNELS,
    GUILD_A,
    World,
    tonight,
    trust_world,
    writer_or_reply,
)
from tests.support.worker import drain


async def rollback(world: World, run_id: int) -> tuple[dict[str, Any], dict[str, Any]]:
    """Dry run first, then the real thing (as the operations guide says); both reports."""
    async with httpx.AsyncClient(base_url=world.stack.api, headers=ADMIN) as api:
        dry = await api.post("/memory/rollback", json={"runId": run_id, "dryRun": True})
        real = await api.post("/memory/rollback", json={"runId": run_id})
    assert dry.status_code == 200 and real.status_code == 200, (dry.text, real.text)
    return dry.json(), real.json()


async def contents(sessions: SessionFactory, user_id: int) -> dict[int, str]:
    async with sessions() as session:
        rows = await session.scalars(select(Memory).where(Memory.user_id == user_id))
        return {m.id: m.content for m in rows}


def skipped(report: dict[str, Any]) -> dict[int, str]:
    return {s["memoryId"]: s["reason"] for s in report["skipped"]}


async def test_forget_all_after_a_night_then_a_rollback_brings_nothing_back(
    world: World, sessions: SessionFactory
) -> None:
    stale = await add_memory(sessions, ALICE, "Alice had a cold last winter", age_days=45)
    world.stack.jev.answers[Question.STALE_KEEP] = "delete"
    run = await tonight(world)  # 1. the night's decay deletes it
    assert run["summary"]["decayed"] == [stale]

    await world.tell(ALICE, "!memory forget all", mention=False)  # 2. nothing left to delete

    dry, real = await rollback(world, run["runId"])  # 3. the operator undoes the night
    expected = {stale: SkipReason.OWNER_FORGOT_ALL}
    assert skipped(dry) == skipped(real) == expected
    assert real["reinserted"] == [] and await contents(sessions, ALICE) == {}


async def test_forgetting_one_memory_a_night_updated_survives_the_nights_rollback(
    world: World, sessions: SessionFactory
) -> None:
    target = await add_memory(sessions, ALICE, "Alice lives in Kyoto", age_days=2)
    await add_message(
        sessions,
        id=next_id(),
        channel_id=CHANNEL_A,
        author_id=ALICE,
        author_name="alice",
        content="I moved to Osaka last week",
        at=utcnow() - timedelta(hours=2),
    )
    world.stack.jev.answers[Question.MEMORY_VERDICT] = "update"
    world.stack.jev.answers[Question.ADD_MEMORY] = 0.0
    run = await tonight(world)
    assert run["summary"]["updated"] == [target]

    await world.tell(ALICE, f"!memory forget {target}", mention=False)

    dry, real = await rollback(world, run["runId"])
    assert skipped(dry) == skipped(real) == {target: SkipReason.FORGOTTEN_BY_OWNER}
    assert real["restored"] == [] and await contents(sessions, ALICE) == {}


async def test_a_memory_expired_by_retention_is_never_brought_back(
    settings: Settings, sessions: SessionFactory, redis: object, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with trust_world(settings, monkeypatch, memory_retention_days=30) as world:
        expired = await add_memory(sessions, ALICE, "Alice's old phone number is 555", age_days=90)
        run = await tonight(world)
        assert run["summary"]["expired"] == [expired]
        async with sessions() as session:
            [row] = await session.scalars(select(MemoryLog).where(MemoryLog.memory_id == expired))
        assert row.before == {"redacted": True} and "555" not in json.dumps(row.after)

        dry, real = await rollback(world, run["runId"])

    assert skipped(dry) == skipped(real) == {expired: SkipReason.EXPIRED}
    assert await contents(sessions, ALICE) == {}


async def test_a_forget_racing_a_rollback_still_wins(
    world: World, sessions: SessionFactory
) -> None:
    stale = [
        await add_memory(sessions, ALICE, f"Alice's passing detail {n}", age_days=45)
        for n in range(5)
    ]
    world.stack.jev.answers[Question.STALE_KEEP] = "delete"
    run = await tonight(world)
    assert sorted(run["summary"]["decayed"]) == stale
    await add_memory(sessions, ALICE, "Alice knits", age_days=1)

    async def forget_all() -> None:
        await world.tell(ALICE, "!memory forget all", mention=False)

    async def undo() -> int:
        async with httpx.AsyncClient(base_url=world.stack.api, headers=ADMIN) as api:
            answer = await api.post("/memory/rollback", json={"runId": run["runId"]})
        return answer.status_code

    _, status = await asyncio.gather(forget_all(), undo())

    assert status == 200
    await drain(world.stack.settings)
    assert await contents(sessions, ALICE) == {}  # whichever went first, nothing came back


async def test_ledger_content_retention_redacts_old_text_and_refuses_those_rollbacks(
    world: World, sessions: SessionFactory
) -> None:
    await add_memory(sessions, ALICE, "Alice had a cold last winter", age_days=45)
    world.stack.jev.answers[Question.STALE_KEEP] = "delete"
    run = await tonight(world)

    assert await redact_old_ledger_content(sessions, days=None, now=utcnow()) == set()  # off
    later = utcnow() + timedelta(days=31)
    assert await redact_old_ledger_content(sessions, days=30, now=later) == {run["runId"]}

    async with sessions() as session:
        logged = list(await session.scalars(select(MemoryLog).where(MemoryLog.action != "read")))
    assert logged and all(r.before in (None, {"redacted": True}) for r in logged)
    async with httpx.AsyncClient(base_url=world.stack.api, headers=ADMIN) as api:
        for body in ({"runId": run["runId"], "dryRun": True}, {"runId": run["runId"]}):
            refused = await api.post("/memory/rollback", json=body)
            assert refused.status_code == 410
            assert refused.json() == {
                "contentRedacted": True,
                "runId": run["runId"],
                "detail": refused.json()["detail"],
            }
        assert (await api.get(f"/nightly/runs/{run['runId']}")).json()["rolledBackAt"] is None


async def test_decay_reviews_sixty_stale_memories_over_three_nights_each_once(
    world: World, sessions: SessionFactory
) -> None:
    ids = [
        await add_memory(sessions, n % 3 + ALICE, f"stale note {n:02d}", age_days=40 + n)
        for n in range(60)
    ]
    queue = create_queue(world.stack.settings.redis_url)
    reviewed: list[set[str]] = []
    try:
        for day in range(3):
            world.stack.jev.requests.clear()
            moment = utcnow() + timedelta(days=day)
            started = await start_nightly_run(sessions, queue, now=moment)
            assert isinstance(started, Started)
            await drain(world.stack.settings)
            prompts = [b["prompt"] for b in world.stack.jev.asked(Question.STALE_KEEP)]
            reviewed.append({p.split("Note: ", 1)[1].split("\n", 1)[0] for p in prompts})
    finally:
        await queue.close()

    assert [len(night) for night in reviewed] == [20, 20, 20]  # the cap, each night
    assert set().union(*reviewed) == {f"stale note {n:02d}" for n in range(60)}
    assert len(await contents(sessions, ALICE)) + len(await contents(sessions, BOB)) > 0
    async with sessions() as session:
        kept = await session.scalar(select(Memory.id).where(Memory.reviewed_at.is_(None)))
    assert kept is None and len(ids) == 60  # every one reviewed once, none twice


# --- erasure: zero traces --------------------------------------------------------------------

MARKERS = ("zebra-marker-4411", "okapi-marker-7782", "lynx-marker-9931", "ibis-marker-5523")
NAMES = ("Alice Quokka", "alice_q")


def echoing(body: dict[str, Any]) -> Text:
    """A model that quotes what it is given: episodes, diaries and style revisions repeat
    the activity, so they carry her words unless the erasure takes them out."""
    system = " ".join(block["text"] for block in body.get("system") or [])
    if system in (EPISODE_SYSTEM, DIARY_SYSTEM, STYLE_SYSTEM):
        return Text(str(body["messages"][0]["content"])[-1500:])
    return writer_or_reply(body)


def said_by_alice(content: str, **kw: Any) -> dict[str, Any]:
    return message_create(
        content=content,
        author_id=ALICE,
        author_name="alice_q",
        global_name="Alice Quokka",
        nick="Alice Quokka",
        message_id=next_id(),
        **kw,
    )


async def traces_left(
    sessions: SessionFactory, needles: tuple[str, ...] = (*MARKERS, *NAMES)
) -> list[tuple[str, str, str]]:
    """Every text and JSON column of every table (found through the catalog, so a table added
    later is scanned too) searched for her marker texts and display names."""
    found: list[tuple[str, str, str]] = []
    async with sessions() as session:
        columns = (
            await session.execute(
                text(
                    "SELECT table_name, column_name FROM information_schema.columns "
                    "WHERE table_schema = 'public' AND table_name <> 'alembic_version' "
                    "AND data_type IN ('text', 'character varying', 'json', 'jsonb')"
                )
            )
        ).all()
        assert {t for t, _ in columns} >= {t.name for t in Base.metadata.sorted_tables} - {
            "memory_consent",
            "memory_sources",
        }
        for table, column in columns:
            for needle in needles:
                hits = await session.scalar(
                    text(f'SELECT count(*) FROM "{table}" WHERE "{column}"::text ILIKE :n'),
                    {"n": f"%{needle}%"},
                )
                if hits:
                    found.append((table, column, needle))
    return found


async def analyse_everything(sessions: SessionFactory) -> None:
    """What autovacuum does now and then: samples of every column into pg_statistic."""
    async with sessions() as session:
        await session.execute(text("ANALYZE"))
        await session.commit()


async def vectors_of(sessions: SessionFactory, needles: tuple[str, ...]) -> set[str]:
    """Every vector (as text) stored beside a row whose text holds one of ``needles``, in
    every vector column of every table (found through the catalog)."""
    found: set[str] = set()
    async with sessions() as session:
        for table, column in await _vector_columns(session):
            for needle in needles:
                rows = await session.scalars(
                    text(
                        f'SELECT "{column}"::text FROM "{table}" '
                        f'WHERE "{column}" IS NOT NULL AND content ILIKE :n'
                    ),
                    {"n": f"%{needle}%"},
                )
                found.update(rows)
    return found


async def vectors_left(sessions: SessionFactory, vectors: set[str]) -> list[tuple[str, str]]:
    """Which vector columns (of any table) still hold one of ``vectors``."""
    left: list[tuple[str, str]] = []
    async with sessions() as session:
        for table, column in await _vector_columns(session):
            stored = set(
                await session.scalars(
                    text(f'SELECT "{column}"::text FROM "{table}" WHERE "{column}" IS NOT NULL')
                )
            )
            if stored & vectors:
                left.append((table, column))
    return left


async def figures_of(
    sessions: SessionFactory, needles: tuple[str, ...]
) -> set[tuple[str, str, int]]:
    """(table, column, row id) of every figure derived from a row's text (a floating-point
    column of a table with `content` and `embedding`: the crowd figures of migration 0019, and
    any added later) held beside a row whose text holds one of ``needles``."""
    found: set[tuple[str, str, int]] = set()
    async with sessions() as session:
        for table, column in await _figure_columns(session):
            for needle in needles:
                rows = await session.scalars(
                    text(
                        f'SELECT id FROM "{table}" WHERE "{column}" IS NOT NULL '
                        "AND content ILIKE :n"
                    ),
                    {"n": f"%{needle}%"},
                )
                found.update((table, column, int(i)) for i in rows)
    return found


async def figures_left(
    sessions: SessionFactory, figures: set[tuple[str, str, int]]
) -> list[tuple[str, str, int]]:
    """Which of ``figures`` are still held."""
    left: list[tuple[str, str, int]] = []
    async with sessions() as session:
        for table, column, row in sorted(figures):
            held = await session.scalar(
                text(f'SELECT "{column}" IS NOT NULL FROM "{table}" WHERE id = :i'), {"i": row}
            )
            if held:
                left.append((table, column, row))
    return left


async def _figure_columns(session: Any) -> list[tuple[str, str]]:
    columns = await session.execute(
        text(
            "SELECT c.table_name, c.column_name FROM information_schema.columns c "
            "WHERE c.table_schema = 'public' AND c.data_type IN ('real', 'double precision') "
            "AND EXISTS (SELECT FROM information_schema.columns e WHERE e.table_schema = 'public' "
            "AND e.table_name = c.table_name AND e.column_name = 'embedding') "
            "AND EXISTS (SELECT FROM information_schema.columns t WHERE t.table_schema = 'public' "
            "AND t.table_name = c.table_name AND t.column_name = 'content')"
        )
    )
    found = [(t, c) for t, c in columns.tuples()]
    assert ("memories", "crowd") in found
    return found


async def _vector_columns(session: Any) -> list[tuple[str, str]]:
    columns = await session.execute(
        text(
            "SELECT table_name, column_name FROM information_schema.columns "
            "WHERE table_schema = 'public' AND udt_name IN ('vector', 'halfvec')"
        )
    )
    found = [(t, c) for t, c in columns.tuples()]
    assert {t for t, _ in found} >= {"memories", "messages"}
    return found


async def rows_keyed_by(
    sessions: SessionFactory, user_id: int, tables: tuple[str, ...]
) -> dict[str, int]:
    async with sessions() as session:
        return {
            table: int(
                await session.scalar(
                    text(f'SELECT count(*) FROM "{table}" WHERE user_id = :u'), {"u": user_id}
                )
                or 0
            )
            for table in tables
        }


async def bobs_rows(sessions: SessionFactory) -> dict[str, list[str]]:
    """Everything Bob wrote and everything kept about him, as text."""
    async with sessions() as session:
        return {
            "messages": list(
                await session.scalars(
                    text("SELECT content FROM messages WHERE author_id = :b ORDER BY id"),
                    {"b": BOB},
                )
            ),
            "memories": list(
                await session.scalars(
                    text("SELECT content FROM memories WHERE user_id = :b ORDER BY id"),
                    {"b": BOB},
                )
            ),
            "ledger": list(
                await session.scalars(
                    text(
                        "SELECT coalesce(before::text, '') || coalesce(after::text, '') "
                        "FROM memory_log WHERE user_id = :b ORDER BY id"
                    ),
                    {"b": BOB},
                )
            ),
        }


async def test_an_erasure_leaves_no_trace_of_her_words_in_any_table_and_bobs_intact(
    settings: Settings, sessions: SessionFactory, redis: object, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake = FakeEmbeddings()
    async with (
        serve(fake.app) as embeddings_url,
        trust_world(
            settings,
            monkeypatch,
            memory_consolidate_every=4,
            memory_recall=MemoryRecall.RELEVANT,
            **fake_settings(fake, embeddings_url),
        ) as world,
    ):
        stack = world.stack
        stack.model.responder = echoing
        stack.jev.answers[Question.IS_CORRECTION] = True
        # She talks in the guild (a memory, a reply) and in her DM (a private memory).
        told = said_by_alice(f"<@{BOT_ID}> {MARKERS[0]} I keep bees on the roof")
        await stack.deliver(told)
        await stack.deliver(
            said_by_alice(
                f"{MARKERS[1]} my private diagnosis", guild_id=None, channel_id=DM_CHANNELS[ALICE]
            )
        )
        bot_reply = stack.discord.messages_in(CHANNEL_A)[-1]
        # She reacts to the bot and corrects it; Bob replies to her message, naming her and
        # mentioning her: his own words.
        await stack.deliver(
            reaction_add(message_id=int(bot_reply["id"]), user_id=ALICE, message_author_id=BOT_ID),
            said_by_alice(
                f"that's wrong, {MARKERS[2]}",
                reply_to=message_create(
                    content=bot_reply["content"],
                    message_id=int(bot_reply["id"]),
                    author_id=BOT_ID,
                    author_name="companion",
                    bot=True,
                )["d"],
            ),
            message_create(
                content=f"I think Alice Quokka keeps bees too, ask <@{ALICE}>",
                author_id=BOB,
                author_name="bob",
                message_id=next_id(),
                reply_to=told["d"],
            ),
        )
        # She searches her memories with a slash command: its recorded frame holds her words.
        await register(stack)
        searched = stack.discord.interactions.use(
            "/memory search",
            {"words": f"{MARKERS[3]} bees"},
            user_id=ALICE,
            channel_id=CHANNEL_A,
            guild_id=int(told["d"]["guild_id"]),
            username="alice_q",
        )
        await stack.deliver(frame("INTERACTION_CREATE", searched))
        await tonight(world)  # a diary and a style revision built from all of that
        await backfill_now(stack.settings)  # her messages and memories get their vectors
        hers = await vectors_of(sessions, MARKERS)
        assert len(hers) >= 4, hers  # before the erasure her vectors are there
        her_figures = await figures_of(sessions, MARKERS)
        assert her_figures, "her memories' crowd figures"
        # Before the erasure the scan finds her words all over the place.
        assert {table for table, _, _ in await traces_left(sessions, MARKERS)} >= {
            "episodes",
            "inbox",
            "memories",
            "memory_log",
            "messages",
            "observations",
            "signals",
            "style_overrides",
        }
        assert {table for table, _, _ in await traces_left(sessions, MARKERS[3:])} == {"inbox"}
        his = await bobs_rows(sessions)
        # The planner's samples hold her texts, tokens and vectors too.
        await analyse_everything(sessions)
        assert {t for t, _ in await sampled(sessions, MARKERS)} >= {"memories", "messages"}
        assert await sampled(sessions, hers)

        await world.tell(ALICE, "!forgetme", mention=False)

        assert await traces_left(sessions, MARKERS) == []  # nothing of what she wrote
        assert await vectors_left(sessions, hers) == []  # nor a vector made from it
        assert await figures_left(sessions, her_figures) == []  # nor a figure taken from one
        assert await sampled(sessions, (*MARKERS, *hers)) == set()  # nor a sample of either
        # Nor a row kept under her id where she is a key, not a name (her folded read counts,
        # her model usage: the usage stays in the totals as nobody's).
        assert await rows_keyed_by(sessions, ALICE, ("memory_read_counts", "model_usage")) == {
            "memory_read_counts": 0,
            "model_usage": 0,
        }
        # Her names remain only in what Bob wrote and what is kept about him, as he wrote it
        # (less the mention of her id).
        assert {table for table, _, _ in await traces_left(sessions, NAMES)} <= {
            "messages",
            "memories",
            "memory_log",
            "observations",
            "inbox",
        }
        after = await bobs_rows(sessions)
        expected = {
            key: [row.replace(f"<@{ALICE}>", "@someone") for row in rows]
            for key, rows in his.items()
        }
        # One row more in his ledger per memory of his: the change that replaced the mention.
        assert after["ledger"][: len(his["ledger"])] == expected.pop("ledger")
        assert len(after.pop("ledger")) == len(his["ledger"]) + len(his["memories"])
        assert after == expected
        receipt = world.dm_text(ALICE)
    assert "erased" in receipt and "`!memory resume`" in receipt
    async with sessions() as session:
        rows = list(await session.scalars(select(MemoryLog).where(MemoryLog.user_id == ALICE)))
    # What remains keyed by her id: the ledger's redacted rows, reads and the receipt.
    assert all(
        r.action == "read" or r.before in (None, {"redacted": True}) or r.memory_id is None
        for r in rows
    ), [(r.actor, r.action, r.before) for r in rows]
    assert GUILD_A  # the guild she spoke in is the one the frames name
