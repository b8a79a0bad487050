"""Migration 0021: the covering index is built over rows written before it, a vector too long
for it is still written (left out of the index), autovacuum visits the table sooner, and it
goes down again, leaving the rows as they were."""

from __future__ import annotations

from sqlalchemy.ext.asyncio import AsyncEngine

from tests.support.migrations import database_at

# Random values, as a model's: they hardly compress, so the entry is as long as the vector.
_ADD = (
    "INSERT INTO memories (user_id, content, embedding, embedding_space) "
    "VALUES (7, $1, CAST(CAST(ARRAY(SELECT random() - 0.5 FROM generate_series(1, $2::int)) "
    "AS real[]) AS halfvec), $3)"
)


async def _state(engine: AsyncEngine) -> tuple[bool, str | None]:
    """Whether the index exists, and the table's storage options."""
    async with engine.connect() as conn:
        found = await conn.exec_driver_sql(
            "SELECT to_regclass('ix_memories_vectors') IS NOT NULL, "
            "(SELECT reloptions::text FROM pg_class WHERE relname = 'memories')"
        )
        present, options = found.one()
    return bool(present), options


async def test_the_index_holds_the_short_vectors_and_goes_down_again() -> None:
    async with database_at("m0021", "0020") as database:
        async with database.engine.begin() as conn:
            await conn.exec_driver_sql(_ADD, ("before, 384", 384, "m@384/field"))
            await conn.exec_driver_sql(_ADD, ("before, 1536", 1536, "big@1536/field"))

        await database.migrate("head")
        # A vector too long for a btree entry is written all the same: the index leaves it out.
        async with database.engine.begin() as conn:
            await conn.exec_driver_sql(_ADD, ("after, 1024", 1024, "m@1024/field"))
            await conn.exec_driver_sql(_ADD, ("after, 3072", 3072, "bigger@3072/field"))
        present, options = await _state(database.engine)
        assert present
        assert options is not None and "autovacuum_vacuum_insert_scale_factor=0.02" in options

        await database.engine.dispose()
        await database.migrate("0020", down=True)
        present, options = await _state(database.engine)
        assert not present and options is None
        async with database.engine.connect() as conn:
            rows = (await conn.exec_driver_sql("SELECT count(*) FROM memories")).scalar_one()
        assert rows == 4
        await database.engine.dispose()
        await database.migrate("head")
