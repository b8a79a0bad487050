"""MEM-01 on real Postgres: every handled gateway event kind becomes one observation row (a
cheap insert, no model call), a replayed event inserts nothing, excerpts stay short and
nobody's words are filed under someone else."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sqlalchemy import select

from app.consent.service import Learning
from app.db import SessionFactory, unit_of_work
from app.frames.events import (
    Event,
    MessageCreate,
    MessageDelete,
    MessageDeleteBulk,
    MessageUpdate,
    ReactionAdd,
    ReactionRemove,
    ReactionRemoveAll,
    ReactionRemoveEmoji,
    parse_dispatch,
)
from app.models.structured import Observation
from app.observations.service import (
    observe_bot_message,
    observe_deletes,
    observe_edit,
    observe_message,
    observe_reaction,
)
from app.observations.store import EXCERPT_CHARS, UNKNOWN_USER, excerpt
from tests.support.frames import (
    Frame,
    message_create,
    message_delete,
    message_delete_bulk,
    message_update,
    reaction_add,
    reaction_remove,
    reaction_remove_all,
    reaction_remove_emoji,
)
from tests.support.memory_env import BOT_ID, add_message

CHANNEL = 500
ALICE, BOB, CAROL = 11, 22, 33
T0 = datetime(2026, 11, 1, 12, 0, tzinfo=UTC)


def event(frame: Frame) -> Event:
    parsed = parse_dispatch(frame)
    assert isinstance(parsed, Event)
    return parsed


def gateway_events() -> list[Event]:
    """One of each handled type, as the relay would deliver them."""
    where: dict[str, Any] = {"channel_id": CHANNEL, "guild_id": None}
    return [
        event(
            message_create(
                content="I just adopted a shiba called Pochi",
                message_id=101,
                author_id=ALICE,
                channel_id=CHANNEL,
                guild_id=1,
                timestamp=T0,
            )
        ),
        event(
            message_update(
                message_id=101,
                author_id=ALICE,
                content="I just adopted a shiba called Pochi!!",
                edited_at=T0,
                **where,
            )
        ),
        event(reaction_add(message_id=101, user_id=BOB, emoji="❤️", **where)),
        event(reaction_remove(message_id=101, user_id=BOB, emoji="❤️", **where)),
        event(reaction_remove_emoji(message_id=101, emoji="blob", emoji_id=77, **where)),
        event(reaction_remove_all(message_id=101, **where)),
        event(message_delete(message_id=101, **where)),
        event(message_delete_bulk(message_ids=[102, 999], **where)),
    ]


async def route(sessions: SessionFactory, ev: Event, *, active: bool = True) -> None:
    """What the lead's event router does for each type, in one transaction."""
    data, learning = ev.data, Learning(active)
    async with unit_of_work(sessions) as session:
        match data:
            case MessageCreate():
                await observe_message(session, data, ev.dedupe_id, learning)
            case MessageUpdate():
                await observe_edit(session, data, ev.dedupe_id, learning)
            case MessageDelete() | MessageDeleteBulk():
                ids = [data.id] if isinstance(data, MessageDelete) else data.ids
                await observe_deletes(
                    session, data.channel_id, data.guild_id, ids, ev.dedupe_id, learning
                )
            case ReactionAdd() | ReactionRemove() | ReactionRemoveAll() | ReactionRemoveEmoji():
                await observe_reaction(
                    session, ev.type, data, ev.dedupe_id, learning, bot_user_id=BOT_ID
                )


async def rows(sessions: SessionFactory) -> list[tuple[str, int, int | None, str]]:
    async with sessions() as session:
        found = await session.scalars(select(Observation).order_by(Observation.id))
        return [(o.kind, o.user_id, o.message_id, o.content) for o in found]


async def log_alice_and_bob(sessions: SessionFactory) -> None:
    await add_message(
        sessions,
        id=101,
        channel_id=CHANNEL,
        author_id=ALICE,
        author_name="Alice",
        content="I just adopted a shiba called Pochi",
        at=T0,
    )
    await add_message(
        sessions,
        id=102,
        channel_id=CHANNEL,
        author_id=BOB,
        author_name="Bob",
        content="Bob's words that get deleted",
        at=T0,
    )


async def test_mem01_each_event_kind_becomes_one_observation_row(
    sessions: SessionFactory,
) -> None:
    await log_alice_and_bob(sessions)

    for ev in gateway_events():
        await route(sessions, ev)
    async with unit_of_work(sessions) as session:
        await observe_bot_message(
            session,
            message_id=201,
            channel_id=CHANNEL,
            guild_id=None,
            bot_user_id=BOT_ID,
            content="Congratulations on Pochi!",
            event_id="bot:201",
            learning=Learning(True),
        )

    assert await rows(sessions) == [
        ("message", ALICE, 101, "I just adopted a shiba called Pochi"),
        ("edit", ALICE, 101, "I just adopted a shiba called Pochi!!"),
        ("reaction_add", BOB, 101, "❤️"),
        ("reaction_remove", BOB, 101, "❤️"),
        # Clears name no actor: filed under the reacted message's author, emoji only.
        ("reaction_clear_emoji", ALICE, 101, "blob:77"),
        ("reaction_clear", ALICE, 101, ""),
        # Deletes are filed under the deleted message's author and keep none of its words.
        ("delete", ALICE, 101, ""),
        ("delete", BOB, 102, ""),
        ("delete", UNKNOWN_USER, 999, ""),
        ("bot_message", BOT_ID, 201, "Congratulations on Pochi!"),
    ]


async def test_mem01_replayed_events_insert_once(sessions: SessionFactory) -> None:
    await log_alice_and_bob(sessions)
    for ev in gateway_events():
        await route(sessions, ev)
    first = await rows(sessions)

    for ev in gateway_events():  # the relay redelivers, or a job is retried
        await route(sessions, ev)
    async with unit_of_work(sessions) as session:
        for _ in range(2):
            await observe_bot_message(
                session,
                message_id=201,
                channel_id=CHANNEL,
                guild_id=None,
                bot_user_id=BOT_ID,
                content="hi",
                event_id="bot:201",
                learning=Learning(True),
            )

    assert len(first) == 9
    assert await rows(sessions) == [*first, ("bot_message", BOT_ID, 201, "hi")]


async def test_mem01_content_is_a_short_excerpt(sessions: SessionFactory) -> None:
    long = "word " * 120
    ev = event(message_create(content=long, message_id=300, author_id=ALICE, channel_id=CHANNEL))

    await route(sessions, ev)

    [(_, _, _, content)] = await rows(sessions)
    assert len(content) == EXCERPT_CHARS
    assert content.endswith("…")
    assert content == excerpt(long)
    assert excerpt("  two\n lines ") == "two lines"


async def test_mem01_bots_messages_and_reactions_are_not_observed_as_people(
    sessions: SessionFactory,
) -> None:
    bot_echo = event(
        message_create(
            content="Congratulations!",
            message_id=400,
            author_id=BOT_ID,
            author_name="companion",
            bot=True,
            channel_id=CHANNEL,
        )
    )
    bot_reaction = event(reaction_add(message_id=101, user_id=BOT_ID, channel_id=CHANNEL))

    await route(sessions, bot_echo)
    await route(sessions, bot_reaction)

    assert await rows(sessions) == []


async def test_mem01_embed_only_update_is_not_an_edit(sessions: SessionFactory) -> None:
    embed_only = event(message_update(message_id=101, channel_id=CHANNEL, content=None))

    await route(sessions, embed_only)

    assert await rows(sessions) == []


async def test_mem01_edit_without_author_is_filed_under_the_logged_author(
    sessions: SessionFactory,
) -> None:
    await log_alice_and_bob(sessions)
    edit = event(
        message_update(message_id=102, channel_id=CHANNEL, author_id=None, content="Bob, edited")
    )

    await route(sessions, edit)

    assert await rows(sessions) == [("edit", BOB, 102, "Bob, edited")]
