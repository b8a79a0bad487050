"""Operator pins on a real Postgres: a retried pin is one pin, a thread's prompt holds the
global pins, then its parent's, then its own, and removing one answers what it removed."""

from __future__ import annotations

from app.db import SessionFactory, unit_of_work
from app.pins.store import add_pin, pinned_facts, remove_pin

GENERAL, THREAD, STAFF = 11, 12, 2003


async def test_the_same_pin_given_twice_is_one_pin(sessions: SessionFactory) -> None:
    async with unit_of_work(sessions) as session:
        first, created = await add_pin(
            session, scope="channel", channel_id=GENERAL, content="Be kind.", created_by=STAFF
        )
        again, created_again = await add_pin(
            session, scope="channel", channel_id=GENERAL, content="Be kind.", created_by=STAFF
        )
    assert (created, created_again, again.id) == (True, False, first.id)


async def test_a_thread_gets_global_then_parent_then_own_pins(sessions: SessionFactory) -> None:
    async with unit_of_work(sessions) as session:
        for channel, text in [
            (THREAD, "In this thread: spoilers allowed."),
            (GENERAL, "Here: English only."),
        ]:
            await add_pin(
                session, scope="channel", channel_id=channel, content=text, created_by=STAFF
            )
        await add_pin(
            session,
            scope="global",
            channel_id=None,
            content="Everywhere: no medical advice.",
            created_by=STAFF,
        )
        facts = await pinned_facts(session, THREAD, parent_id=GENERAL)
        general = await pinned_facts(session, GENERAL)
    assert facts == [
        "Everywhere: no medical advice.",
        "Here: English only.",
        "In this thread: spoilers allowed.",
    ]
    assert general == ["Everywhere: no medical advice.", "Here: English only."]


async def test_removing_a_pin_answers_it_once(sessions: SessionFactory) -> None:
    async with unit_of_work(sessions) as session:
        pin, _ = await add_pin(
            session, scope="global", channel_id=None, content="Be kind.", created_by=STAFF
        )
    async with unit_of_work(sessions) as session:
        gone = await remove_pin(session, pin.id)
        again = await remove_pin(session, pin.id)
    assert gone is not None and gone.content == "Be kind." and again is None
