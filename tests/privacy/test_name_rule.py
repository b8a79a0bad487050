"""MEM-09's name rule, confined to the person (through the real webhook, worker and
Postgres): it reads only summaries made before their inputs were recorded, only of channels
and nights the person spoke in, and only for a distinctive name theirs alone. A member named
"the" or 「です」 erases nobody else's summary or diary; an artifact with recorded inputs is
judged by those inputs alone."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, date, datetime, timedelta

import pytest
from sqlalchemy import select, text

from app.db import SessionFactory, unit_of_work
from app.kit.clock import jst_day, utcnow
from app.models.nightly import NightlyRun
from app.models.structured import Episode
from app.privacy.identity import distinctive, names_any, names_theirs_alone
from tests.support.frames import message_create, next_id
from tests.support.trust_env import BOB, CHANNEL_A, CHANNEL_B, GUILD_A, GUILD_B, World

THE, DESU, QUOKKA = 2005, 2006, 2007
OTHER_GUILD_CHANNEL = CHANNEL_B  # in GUILD_B: none of them ever spoke there


def episode(content: str, channel: int, sources: Sequence[int] | None) -> Episode:
    guild = GUILD_A if channel == CHANNEL_A else GUILD_B
    return Episode(
        channel_id=channel,
        guild_id=guild,
        content=content,
        source_user_ids=list(sources) if sources is not None else None,
    )


def diary(day: date, text_: str, sources: Sequence[int] | None) -> NightlyRun:
    start = datetime.combine(day, datetime.min.time(), UTC) - timedelta(hours=9)
    return NightlyRun(
        day=day,
        status="finished",
        window_start=start,
        window_end=start + timedelta(days=1),
        diary=text_,
        diary_user_ids=list(sources) if sources is not None else None,
        finished_at=start + timedelta(days=1),
    )


async def summaries(sessions: SessionFactory) -> tuple[list[str], list[str]]:
    """Every episode's text and every diary, in id order."""
    async with sessions() as session:
        episodes = await session.scalars(select(Episode.content).order_by(Episode.id))
        diaries = await session.scalars(select(NightlyRun.diary).order_by(NightlyRun.id))
        return list(episodes), [d or "" for d in diaries]


async def speak_then_forget(world: World, who: int, name: str, said_at: datetime) -> None:
    """``who`` says a line in CHANNEL_A under ``name`` at ``said_at``, then erases themselves."""
    line = message_create(
        content="hello all",
        author_id=who,
        author_name=name,
        channel_id=CHANNEL_A,
        guild_id=GUILD_A,
        message_id=next_id(),
        timestamp=said_at,
    )
    forget = message_create(
        content="!forgetme", author_id=who, author_name=name, channel_id=CHANNEL_A
    )
    await world.stack.deliver(line, forget)


async def test_a_member_named_the_or_desu_erases_no_other_summary_or_diary(
    world: World, sessions: SessionFactory
) -> None:
    now = utcnow()
    today = jst_day(now)  # a diary's day is a JST night, as the nightly run labels it
    async with unit_of_work(sessions) as session:
        session.add_all(
            [
                episode("Bob showed the stamps he found at the market.", CHANNEL_A, [BOB]),
                episode("The group planned the picnic; です調で話した。", CHANNEL_B, [BOB]),
                episode("An old summary: the weather, the trains.", OTHER_GUILD_CHANNEL, None),
                # Made before inputs were recorded, in the channel they speak in: "the" and
                # 「です」 are no one's name, so even these stay.
                episode("An old summary of the channel: です、ます。", CHANNEL_A, None),
                diary(today - timedelta(days=3), "みんなで話しました。楽しかったです。", [BOB]),
                diary(today - timedelta(days=2), "The day the trains stopped.", [BOB]),
                diary(today, "静かな夜でした。the end です。", None),  # tonight, they spoke
            ]
        )
    before = await summaries(sessions)

    await speak_then_forget(world, THE, "the", now)
    await speak_then_forget(world, DESU, "です", now)

    assert await summaries(sessions) == before
    async with sessions() as session:
        statuses = await session.scalars(
            text("SELECT status FROM erasures WHERE user_id IN (:a, :b)"), {"a": THE, "b": DESU}
        )
        assert list(statuses) == ["done", "done"]


async def test_a_distinctive_name_reaches_only_old_summaries_of_her_places(
    world: World, sessions: SessionFactory
) -> None:
    now = utcnow()
    today = jst_day(now)  # a diary's day is a JST night, as the nightly run labels it
    async with unit_of_work(sessions) as session:
        session.add_all(
            [
                episode("Old summary: Quokkaberry shared her bread recipe.", CHANNEL_A, None),
                episode("Old summary: Quokkaberry visited once.", OTHER_GUILD_CHANNEL, None),
                episode("Bob said Quokkaberry bakes well.", CHANNEL_A, [BOB]),  # his inputs
                diary(today, "Quokkaberryさんがパンの話をしました。", None),  # her night
                diary(today - timedelta(days=5), "Quokkaberryは来なかった。", None),  # not hers
            ]
        )

    await speak_then_forget(world, QUOKKA, "Quokkaberry", now)

    episodes, diaries = await summaries(sessions)
    assert episodes == [
        "Old summary: Quokkaberry visited once.",  # another guild's channel: she never spoke
        "Bob said Quokkaberry bakes well.",  # judged by its recorded inputs: Bob's
    ]
    assert diaries == ["", "Quokkaberryは来なかった。"]


# --- pure ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("the", False),  # three letters
        ("です", False),  # two kana, but a common word
        ("Al", False),
        ("there", False),  # a common word
        ("Big Tree", False),  # common words only
        ("alice_w", True),
        ("Alice Quokka", True),
        ("Quokkaberry", True),
        ("さくらもち子", True),
        ("鈴木花", True),  # three Han characters, no common word
    ],
)
def test_a_distinctive_name_is_long_enough_and_no_common_word(name: str, expected: bool) -> None:
    assert distinctive(name) is expected


def test_names_theirs_alone_keeps_only_distinctive_names_no_one_else_used() -> None:
    mine = ["the", "Quokkaberry", "alice_w", "Sam Smith"]
    assert names_theirs_alone(mine, ["sam smith"]) == ["Quokkaberry", "alice_w"]


def test_a_name_stands_as_a_word_unless_written_in_cjk() -> None:
    assert names_any("ask José about it", ["José"])
    assert not names_any("Josélito came", ["José"])
    assert not names_any("Alanna came", ["Alan"])
    assert names_any("今日は鈴木花さんが来た", ["鈴木花"])
    assert names_any("Quokkaberryさんが来た", ["Quokkaberry"])
