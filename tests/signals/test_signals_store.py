"""Feedback signals on a real Postgres: a replayed event counts once, and an erasure removes
the person's own signals only."""

from __future__ import annotations

from sqlalchemy import select

from app.db import SessionFactory, unit_of_work
from app.models.signals import Signal
from app.signals.store import add_signal, delete_by_user

ALICE, BOB, MESSAGE = 2001, 2002, 9001


async def test_the_same_signal_twice_is_stored_once(sessions: SessionFactory) -> None:
    async with unit_of_work(sessions) as session:
        first = await add_signal(
            session, message_id=MESSAGE, user_id=ALICE, kind="reaction", value="👍"
        )
        replayed = await add_signal(
            session, message_id=MESSAGE, user_id=ALICE, kind="reaction", value="👍"
        )
    assert (first, replayed) == (True, False)


async def test_an_erasure_removes_only_that_persons_signals(sessions: SessionFactory) -> None:
    async with unit_of_work(sessions) as session:
        for user in (ALICE, BOB):
            await add_signal(session, message_id=MESSAGE, user_id=user, kind="reaction", value="❤")
    async with unit_of_work(sessions) as session:
        await delete_by_user(session, ALICE, after_id=0, limit=100)
    async with sessions() as session:
        left = list(await session.scalars(select(Signal.user_id)))
    assert left == [BOB]
