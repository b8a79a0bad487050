"""Migration 0008 back-fills `search_tokens` with the very tokenizer the owners write with:
rows that existed before it read exactly as rows the store and the channel log write now."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime

import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from app.channel import store as channel_log
from app.channel.exchange import Place
from app.db import create_session_factory, unit_of_work
from app.frames.events import MessageCreate
from app.kit.tokens import tokenize
from app.memory import store
from app.memory.records import Why
from app.vocabulary import Actor
from tests.support.frames import message_create
from tests.support.migrations import ScratchDatabase, database_at

TEXTS = [
    "Alice has a cat named Miso.",
    "アリスは毎週土曜日に書道教室に通っている",
    "Misoは猫です🐱! <@1000> ＧＲＥＥＮ tea",
    "김치를 좋아해요",
    "🎉🎉",
    "",
]


@pytest.fixture
async def at_0007() -> AsyncIterator[ScratchDatabase]:
    async with database_at("m0008", "0007") as database:
        yield database


async def test_the_backfill_writes_what_the_owners_write(at_0007: ScratchDatabase) -> None:
    async with at_0007.engine.begin() as conn:
        for n, content in enumerate(TEXTS):
            await conn.exec_driver_sql(
                "INSERT INTO memories (user_id, content) VALUES (11, $1)", (content,)
            )
            await conn.exec_driver_sql(
                "INSERT INTO messages (id, channel_id, author_id, author_name, content, "
                "created_at) VALUES ($1, 300, 11, 'alice', $2, now())",
                (n + 1, content),
            )

    await at_0007.migrate("head")

    sessions = create_session_factory(at_0007.engine)
    async with unit_of_work(sessions) as session:
        for content in TEXTS:
            await store.add(session, 22, content, Why(Actor.EXTRACTION), learned_in=Place(1))
            frame = message_create(content=content, channel_id=301, timestamp=datetime.now(UTC))
            await channel_log.log_message(session, MessageCreate.model_validate(frame["d"]))
    expected = {content: tokenize(content) for content in TEXTS}
    for table, backfilled, written in (
        ("memories", "user_id = 11", "user_id = 22"),
        ("messages", "channel_id = 300", "channel_id = 301"),
    ):
        assert await tokens_where(at_0007.engine, table, backfilled) == expected
        assert await tokens_where(at_0007.engine, table, written) == expected


async def tokens_where(engine: AsyncEngine, table: str, where: str) -> dict[str, list[str]]:
    async with engine.connect() as conn:
        rows = await conn.exec_driver_sql(
            f"SELECT content, search_tokens FROM {table} WHERE {where}"
        )
        return {content: tokens for content, tokens in rows}


async def test_the_migration_goes_down_and_up_again(at_0007: ScratchDatabase) -> None:
    await at_0007.migrate("head")
    await at_0007.migrate("0007", down=True)
    await at_0007.migrate("head")
