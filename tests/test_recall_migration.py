"""Migration 0008 back-fills `search_tokens` with the very tokenizer the owners write with:
rows that existed before it read exactly as rows the store and the channel log write now."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import UTC, datetime

import asyncpg
import pytest
from alembic.config import Config
from sqlalchemy.ext.asyncio import AsyncEngine

from alembic import command
from app.channel import log as channel_log
from app.channel.exchange import Place
from app.db import create_engine, create_session_factory, unit_of_work
from app.inbound.frames import MessageCreate
from app.kit.tokens import tokenize
from app.memory import store
from app.memory.records import Why
from app.vocabulary import Actor
from tests.conftest import DB_NAME, PG_HOST, PG_USER
from tests.support.frames import message_create

DB = f"{DB_NAME}_m0008"
URL = f"postgresql+asyncpg://{PG_USER}@{PG_HOST}:5432/{DB}"
TEXTS = [
    "Alice has a cat named Miso.",
    "アリスは毎週土曜日に書道教室に通っている",
    "Misoは猫です🐱! <@1000> ＧＲＥＥＮ tea",
    "김치를 좋아해요",
    "🎉🎉",
    "",
]


def migrate(revision: str, *, down: bool = False) -> None:
    config = Config("alembic.ini")
    config.set_main_option("sqlalchemy.url", URL)
    config.attributes["configure_logger"] = False
    (command.downgrade if down else command.upgrade)(config, revision)


@pytest.fixture
async def engine_at_0007() -> AsyncIterator[AsyncEngine]:
    admin = await asyncpg.connect(host=PG_HOST, user=PG_USER, database="postgres")
    await admin.execute(f'DROP DATABASE IF EXISTS "{DB}" WITH (FORCE)')
    await admin.execute(f'CREATE DATABASE "{DB}"')
    await asyncio.to_thread(migrate, "0007")
    engine = create_engine(URL, pool_size=1)
    try:
        yield engine
    finally:
        await engine.dispose()
        await admin.execute(f'DROP DATABASE IF EXISTS "{DB}" WITH (FORCE)')
        await admin.close()


async def test_the_backfill_writes_what_the_owners_write(engine_at_0007: AsyncEngine) -> None:
    async with engine_at_0007.begin() as conn:
        for n, content in enumerate(TEXTS):
            await conn.exec_driver_sql(
                "INSERT INTO memories (user_id, content) VALUES (11, $1)", (content,)
            )
            await conn.exec_driver_sql(
                "INSERT INTO messages (id, channel_id, author_id, author_name, content, "
                "created_at) VALUES ($1, 300, 11, 'alice', $2, now())",
                (n + 1, content),
            )

    await asyncio.to_thread(migrate, "head")

    sessions = create_session_factory(engine_at_0007)
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
        assert await tokens_where(engine_at_0007, table, backfilled) == expected
        assert await tokens_where(engine_at_0007, table, written) == expected


async def tokens_where(engine: AsyncEngine, table: str, where: str) -> dict[str, list[str]]:
    async with engine.connect() as conn:
        rows = await conn.exec_driver_sql(
            f"SELECT content, search_tokens FROM {table} WHERE {where}"
        )
        return {content: tokens for content, tokens in rows}


async def test_the_migration_goes_down_and_up_again(engine_at_0007: AsyncEngine) -> None:
    await asyncio.to_thread(migrate, "head")
    await asyncio.to_thread(migrate, "0007", down=True)
    await asyncio.to_thread(migrate, "head")
