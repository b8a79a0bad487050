"""Helpers for the seed-001 memory tests: channel activity as both a logged message and an
observation, a FakeAnthropic responder that tells episode calls from writer calls, and reads."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import select

from app.chat.fake import Reply, Text
from app.consent.service import Learning
from app.db import SessionFactory, unit_of_work
from app.models.structured import Episode, Observation
from app.observations.service import observe
from app.observations.store import Kind
from app.structured.consolidation import EPISODE_SYSTEM
from tests.support.memory_env import add_message

T0 = datetime(2026, 11, 1, 12, 0, tzinfo=UTC)


async def say(
    sessions: SessionFactory,
    *,
    id: int,
    channel_id: int,
    author_id: int,
    author_name: str,
    content: str,
    is_bot: bool = False,
) -> None:
    """A message as the turn records it: the channel log row, then its observation."""
    await add_message(
        sessions,
        id=id,
        channel_id=channel_id,
        author_id=author_id,
        author_name=author_name,
        content=content,
        at=T0 + timedelta(seconds=id),
        is_bot=is_bot,
    )
    async with unit_of_work(sessions) as session:
        await observe(
            session,
            Learning(True),
            event_id=f"bot:{id}" if is_bot else str(id),
            channel_id=channel_id,
            guild_id=1,
            user_id=author_id,
            kind=Kind.BOT_MESSAGE if is_bot else Kind.MESSAGE,
            message_id=id,
            content=content,
        )


def is_episode_call(body: dict[str, Any]) -> bool:
    return any(block.get("text") == EPISODE_SYSTEM for block in body.get("system", []))


def writer_speaker(body: dict[str, Any]) -> str:
    """The speaker name the writer was told about ("... exactly one person: <name>, ...")."""
    text = str(body["system"][0]["text"])
    return text.split("exactly one person: ", 1)[1].split(",", 1)[0]


def responder(
    episode: str | Callable[[dict[str, Any]], Reply],
    writer: Callable[[dict[str, Any]], str],
) -> Callable[[dict[str, Any]], Reply]:
    """Episode calls get ``episode``; writer calls get ``writer(body)`` (JSON text)."""

    def answer(body: dict[str, Any]) -> Reply:
        if is_episode_call(body):
            return Text(episode) if isinstance(episode, str) else episode(body)
        return Text(writer(body))

    return answer


def fact_json(text: str, subject: str = "speaker") -> str:
    return json.dumps({"subject": subject, "fact": text})


async def observation_rows(sessions: SessionFactory, channel_id: int) -> list[Observation]:
    async with sessions() as session:
        rows = await session.scalars(
            select(Observation).where(Observation.channel_id == channel_id).order_by(Observation.id)
        )
        return list(rows.all())


async def unconsumed_ids(sessions: SessionFactory, channel_id: int) -> list[int]:
    return [o.id for o in await observation_rows(sessions, channel_id) if o.consumed_at is None]


async def episodes_of(sessions: SessionFactory, channel_id: int) -> list[str]:
    """The channel's episodes, oldest first."""
    async with sessions() as session:
        rows = await session.scalars(
            select(Episode).where(Episode.channel_id == channel_id).order_by(Episode.id)
        )
        return [e.content for e in rows]
