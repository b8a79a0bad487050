"""Erasure that is exact and holds, through the real webhook, worker and Postgres: a name or a
word someone else shares never makes their rows change; a turn in flight writes nothing
back; a delete or edit that arrives before its message still applies."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import text

from app.chat.fake import Reply, Text
from app.config import RecallScope, Settings
from app.db import SessionFactory
from app.decision.vocabulary import Question
from app.privacy.erasure import MAX_FAILURES, RETRY_FAILED_AFTER, resume_erasures
from app.wiring import open_services
from tests.support.frames import (
    message_create,
    message_delete,
    message_update,
    next_id,
    thread_create,
)
from tests.support.memory_env import add_message
from tests.support.stack import BOT_ID, task_agent_settings
from tests.support.trust_env import (
    ALICE,
    BOB,
    CAROL,
    CHANNEL_A,
    GUILD_A,
    World,
    reply_holding_her_memory,
    tonight,
    trust_world,
    writer_or_reply,
)
from tests.support.waiting import wait_until
from tests.support.worker import drain

MALLORY = 2004


def by(who: int, name: str, content: str, **kw: Any) -> dict[str, Any]:
    """A frame from ``who`` writing under display name ``name``."""
    return message_create(
        content=content, author_id=who, author_name=name, message_id=next_id(), **kw
    )


async def rows_about(sessions: SessionFactory, user_id: int) -> dict[str, list[Any]]:
    """Everything kept about one person: their messages, memories and ledger rows, and the
    episodes, diaries and styles made only from them."""
    queries = {
        "messages": "SELECT id, content, author_name FROM messages WHERE author_id = :u",
        "memories": "SELECT id, content, updated_at FROM memories WHERE user_id = :u",
        "ledger": "SELECT id, before, after FROM memory_log WHERE user_id = :u",
        "episodes": "SELECT id, content FROM episodes WHERE source_user_ids = ARRAY[:u]::bigint[]",
        "observations": "SELECT id, content FROM observations WHERE user_id = :u",
        "frames": "SELECT id, payload FROM inbox WHERE author_id = :u",
    }
    out: dict[str, list[Any]] = {}
    async with sessions() as session:
        for name, sql in queries.items():
            rows = await session.execute(text(sql + " ORDER BY 1"), {"u": user_id})
            out[name] = [tuple(row) for row in rows]
    return out


async def table_texts(sessions: SessionFactory) -> str:
    """Every row of every table as JSON text, joined (a needle search over the database)."""
    async with sessions() as session:
        tables = await session.scalars(
            text("SELECT tablename FROM pg_tables WHERE schemaname = 'public'")
        )
        texts: list[str] = []
        for table in list(tables):
            rows = await session.scalars(text(f'SELECT row_to_json(t)::text FROM "{table}" t'))
            texts.extend(rows)
    return "\n".join(texts)


async def test_a_nickname_equal_to_another_members_name_erases_only_its_owner(
    world: World, sessions: SessionFactory
) -> None:
    # Alice writes as "alice"; her words feed a memory, a reply and a channel summary.
    await world.stack.deliver(
        *(by(ALICE, "alice", f"<@{BOT_ID}> I bake sourdough, loaf {n}") for n in range(3))
    )
    await tonight(world)
    before = await rows_about(sessions, ALICE)
    assert before["memories"] and before["messages"] and before["ledger"]

    # Mallory takes the nickname "alice", says a line naming Alice, then erases herself.
    await world.stack.deliver(
        by(MALLORY, "alice", "alice bakes the best sourdough"),
        by(MALLORY, "alice", "!forgetme"),
    )

    assert await rows_about(sessions, ALICE) == before
    hers = await rows_about(sessions, MALLORY)
    assert [hers[k] for k in ("messages", "memories", "episodes", "observations")] == [[]] * 4
    [(_, receipt_before, receipt)] = hers["ledger"]  # only the erasure's receipt
    assert receipt_before is None and set(receipt) >= {"messages", "memories"}
    async with sessions() as session:  # her frames are stubs: no text, no names
        payloads = await session.scalars(
            text("SELECT payload::text FROM inbox WHERE author_id = :u"), {"u": MALLORY}
        )
        assert all("sourdough" not in p and '"alice"' not in p for p in payloads)


async def test_words_she_shares_with_others_stay_in_their_texts(
    world: World, sessions: SessionFactory
) -> None:
    shared = "see you at the Saturday market"  # 8+ characters, said by both
    await world.stack.deliver(
        by(BOB, "bob", f"{shared}, everyone"),
        by(ALICE, "alice", f"<@{BOT_ID}> {shared}"),
        by(BOB, "bob", f"<@{BOT_ID}> I said it first: {shared}"),
    )
    his = await rows_about(sessions, BOB)
    assert any(shared in str(m) for m in his["memories"])

    await world.tell(ALICE, "!forgetme", mention=False)

    assert await rows_about(sessions, BOB) == his
    async with sessions() as session:
        hers = await session.scalar(
            text("SELECT count(*) FROM messages WHERE author_id = :u"), {"u": ALICE}
        )
    assert hers == 0


async def test_a_reply_waiting_on_the_model_writes_nothing_after_forgetme(
    world: World, sessions: SessionFactory
) -> None:
    stack = world.stack
    release = asyncio.Event()
    said, answer = "tell me about my zeppelin-hobby-5521", "Your zeppelin-reply-8830 is lovely"

    async def slow(body: dict[str, Any]) -> Reply:
        if "zeppelin-hobby" in json.dumps(body.get("messages")):
            await release.wait()
            return Text(answer)
        return writer_or_reply(body)

    stack.model.responder = slow
    await stack.post(world.say(ALICE, said))
    worker = asyncio.create_task(drain(stack.settings))
    await wait_until(lambda: bool(stack.model.requests), within=20, what="the reply's model call")

    await stack.post(world.say(ALICE, "!forgetme", mention=False))

    async def erased() -> bool:
        async with sessions() as session:
            status = await session.scalar(text("SELECT status FROM erasures"))
        return bool(status == "done")

    await wait_until(erased, within=30, what="the erasure to finish")
    release.set()
    await worker
    await drain(stack.settings)  # anything the turn left behind (the memory job) runs too

    everything = await table_texts(sessions)
    assert "zeppelin-hobby" not in everything and "zeppelin-reply" not in everything
    assert [m["content"] for m in stack.discord.messages_in(CHANNEL_A)][-1].startswith(
        "I'm erasing"
    )  # the reply never went out after the erasure began


async def test_a_delete_that_arrives_before_its_message_keeps_it_from_the_model(
    world: World, sessions: SessionFactory
) -> None:
    stack = world.stack
    message = world.say(ALICE, "my bank pin is mango-secret-7731")
    mid = int(message["d"]["id"])
    await stack.deliver(message_delete(message_id=mid, channel_id=CHANNEL_A, guild_id=GUILD_A))

    await stack.deliver(message)

    assert not [b for b in stack.model.requests if "mango-secret" in json.dumps(b)]
    assert not [b for b in stack.jev.requests if "mango-secret" in json.dumps(b)]
    assert stack.discord.messages_in(CHANNEL_A) == []
    async with sessions() as session:
        deleted = await session.scalar(
            text("SELECT deleted_at IS NOT NULL FROM messages WHERE id = :i"), {"i": mid}
        )
        observed = await session.scalar(
            text("SELECT count(*) FROM observations WHERE message_id = :i AND kind = 'message'"),
            {"i": mid},
        )
        tombstones = await session.scalar(text("SELECT count(*) FROM message_tombstones"))
    assert deleted is True and observed == 0 and tombstones == 0


async def test_an_edit_that_arrives_before_its_message_is_what_gets_logged_and_answered(
    world: World, sessions: SessionFactory
) -> None:
    stack = world.stack
    message = world.say(ALICE, "I live in Nagoya-original")
    mid = int(message["d"]["id"])
    edit = message_update(
        message_id=mid,
        channel_id=CHANNEL_A,
        guild_id=GUILD_A,
        author_id=ALICE,
        content=f"<@{BOT_ID}> I live in Sapporo-edited",
    )
    await stack.deliver(edit)

    await stack.deliver(message)

    async with sessions() as session:
        logged = await session.scalar(
            text("SELECT content FROM messages WHERE id = :i"), {"i": mid}
        )
    assert logged == edit["d"]["content"]
    prompts = json.dumps(stack.model.requests) + json.dumps(stack.jev.requests)
    assert "Sapporo-edited" in prompts and "Nagoya-original" not in prompts
    assert len(stack.discord.messages_in(CHANNEL_A)) == 1  # the edited message was answered


async def test_a_reply_to_bob_that_held_her_memories_is_blanked_by_her_erasure(
    settings: Settings, sessions: SessionFactory, redis: object, monkeypatch: Any
) -> None:
    scope = RecallScope.PARTICIPANTS
    async with trust_world(settings, monkeypatch, memory_recall_scope=scope) as world:
        held = await reply_holding_her_memory(world)
        asked, to_bob = held["asked"], held["reply"]
        async with sessions() as session:  # his reply's prompt held her memory
            read = await session.scalar(
                text("SELECT after FROM memory_log WHERE user_id = :u AND trigger = :t"),
                {"u": ALICE, "t": f"turn:{asked['d']['id']}"},
            )
        assert read and "Fact: <@1000> I keep bees" in world.last_reply_prompt()

        await world.tell(ALICE, "!forgetme", mention=False)

        async with sessions() as session:
            kept = await session.scalar(
                text("SELECT content FROM messages WHERE id = :i"), {"i": int(to_bob["id"])}
            )
            his = await session.scalar(
                text("SELECT count(*) FROM messages WHERE author_id = :u"), {"u": BOB}
            )
        assert kept == "" and his == 1
    assert GUILD_A


async def channel_row(sessions: SessionFactory, channel_id: int) -> dict[str, Any]:
    async with sessions() as session:
        row = (
            await session.execute(
                text("SELECT name, mode, persona FROM channels WHERE id = :c"), {"c": channel_id}
            )
        ).one()
    return dict(row._mapping)


async def test_her_persona_goes_with_her_though_bob_changed_the_mode_since(
    settings: Settings, sessions: SessionFactory, redis: object, monkeypatch: Any
) -> None:
    async with trust_world(settings, monkeypatch, staff_user_ids=[ALICE, BOB]) as world:
        await world.tell(ALICE, "!bot channel persona Talk like a sourdough baker", mention=False)
        await world.tell(BOB, "!bot channel mode free", mention=False)
        assert (await channel_row(sessions, CHANNEL_A))["persona"] == "Talk like a sourdough baker"

        await world.tell(BOB, "!forgetme", mention=False)  # not his words: the persona stays
        assert (await channel_row(sessions, CHANNEL_A))["persona"] == "Talk like a sourdough baker"
        await world.tell(ALICE, "!forgetme", mention=False)

        assert await channel_row(sessions, CHANNEL_A) == {
            "name": None,
            "mode": "free",  # a setting, not anyone's words
            "persona": None,
        }


async def test_the_name_of_a_thread_she_started_goes_from_the_directory_and_the_frames(
    world: World, sessions: SessionFactory
) -> None:
    hers, his = next_id(), next_id()
    await world.stack.deliver(
        thread_create(thread_id=hers, parent_id=CHANNEL_A, name="Alice's quokka plans"),
        thread_create(thread_id=his, parent_id=CHANNEL_A, name="stamp swap", owner_id=BOB),
    )
    assert (await channel_row(sessions, hers))["name"] == "Alice's quokka plans"

    await world.tell(ALICE, "!forgetme", mention=False)

    assert (await channel_row(sessions, hers))["name"] is None
    assert (await channel_row(sessions, his))["name"] == "stamp swap"
    assert "quokka plans" not in await table_texts(sessions)  # her frame is a stub of ids
    [*_, (_, _, receipt)] = (await rows_about(sessions, ALICE))["ledger"]
    assert receipt["thread_names"] == 1


async def test_her_words_quoted_through_a_reply_chain_leave_the_task_sessions_with_her(
    settings: Settings, sessions: SessionFactory, redis: object, monkeypatch: Any
) -> None:
    async with (
        task_agent_settings() as agent,
        trust_world(settings, monkeypatch, **agent) as world,
    ):
        stack = world.stack
        recipe = by(CAROL, "carol", "my grandmother's recipe: saffron-marker-5521 in the dough")
        await stack.deliver(recipe)
        start = datetime.now(UTC)
        for n in range(25):  # her line scrolls out of the last twenty: only the chain has it
            await add_message(
                sessions,
                id=next_id(),
                channel_id=CHANNEL_A,
                guild_id=GUILD_A,
                author_id=BOB,
                author_name="bob",
                content=f"unrelated chatter {n}",
                at=start + timedelta(seconds=n),
            )
        stack.jev.answers[Question.IS_TASK] = True
        stack.model.responder = lambda body: Text("Found three bakeries that sell saffron.")
        await stack.deliver(
            by(BOB, "bob", f"<@{BOT_ID}> where can I buy what she needs?", reply_to=recipe["d"])
        )
        assert "saffron-marker-5521" in await agent_sessions(sessions)

        await world.tell(CAROL, "!forgetme", mention=False)

        assert "saffron-marker-5521" not in await agent_sessions(sessions)


async def agent_sessions(sessions: SessionFactory) -> str:
    async with sessions() as session:
        rows = await session.scalars(text("SELECT history::text FROM agent_sessions"))
        return "\n".join(rows)


REFUSE_RECEIPT = """
CREATE FUNCTION refuse_receipt() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN RAISE EXCEPTION 'the ledger is read-only today'; END $$;
CREATE TRIGGER refuse_receipt BEFORE INSERT ON memory_log FOR EACH ROW
WHEN (NEW.actor = 'forgetme' AND NEW.memory_id IS NULL) EXECUTE FUNCTION refuse_receipt();
"""


async def her_erasure(sessions: SessionFactory) -> dict[str, Any]:
    async with sessions() as session:
        row = (
            await session.execute(
                text("SELECT id, status, progress FROM erasures WHERE user_id = :u"), {"u": ALICE}
            )
        ).one()
    return dict(row._mapping)


async def test_a_failed_erasure_keeps_no_name_and_the_sweeper_finishes_it(
    world: World, sessions: SessionFactory
) -> None:
    await world.stack.deliver(by(ALICE, "alice_quokka", f"<@{BOT_ID}> I keep bees on the roof"))
    async with sessions() as session, session.begin():  # a fault at the very end
        for statement in REFUSE_RECEIPT.split(";\n"):
            await session.execute(text(statement))
    await world.tell(ALICE, "!forgetme", mention=False)
    async with open_services(world.stack.settings) as services:
        for _ in range(MAX_FAILURES):  # the sweeper's minute, until it shows as failed
            if (await her_erasure(sessions))["status"] == "failed":
                break
            await resume_erasures(services)
            await drain(world.stack.settings)
        failed = await her_erasure(sessions)
        assert failed["status"] == "failed"
        assert failed["progress"]["names"] == []  # used by then: not kept while it waits
        async with sessions() as session, session.begin():
            await session.execute(text("DROP TRIGGER refuse_receipt ON memory_log"))
            await session.execute(
                text("UPDATE erasures SET finished_at = finished_at - make_interval(secs => :s)"),
                {"s": RETRY_FAILED_AFTER.total_seconds()},
            )

        await resume_erasures(services)
        await drain(world.stack.settings)

    done = await her_erasure(sessions)
    assert done["status"] == "done" and done["progress"] == {}
    assert "alice_quokka" not in await table_texts(sessions)
