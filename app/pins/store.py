"""Operator pins (seed 001): facts staff set for one channel or for every channel.

Thin queries; the staff commands decide who may call them (a channel pin records the guild
of its channel, so only that guild's staff remove it), recall reads them into prompts."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from sqlalchemy import delete, or_, select
from sqlalchemy.ext.asyncio import AsyncSession

from app.kit.sql import replace_mentions_in
from app.models.structured import Pin

Scope = Literal["channel", "global"]
MAX_PIN_CHARS = 500
MAX_PINS = 20


@dataclass(frozen=True, slots=True)
class PinRecord:
    id: int
    scope: str
    channel_id: int | None
    content: str
    guild_id: int | None = None  # the guild of a channel pin's channel (None: DM, or unknown)


def _record(pin: Pin) -> PinRecord:
    return PinRecord(pin.id, pin.scope, pin.channel_id, pin.content, pin.guild_id)


async def add_pin(
    session: AsyncSession,
    *,
    scope: Scope,
    channel_id: int | None,
    content: str,
    created_by: int,
    guild_id: int | None = None,
) -> tuple[PinRecord, bool]:
    """Insert a pin; ``(pin, created)``. The same fact pinned again by the same person in the
    same place returns the existing pin, so a retried command does not pin twice."""
    where_channel = Pin.channel_id.is_(None) if channel_id is None else Pin.channel_id == channel_id
    existing = await session.scalar(
        select(Pin).where(
            Pin.scope == scope,
            where_channel,
            Pin.content == content,
            Pin.created_by == created_by,
        )
    )
    if existing is not None:
        return _record(existing), False
    pin = Pin(
        scope=scope,
        channel_id=channel_id,
        guild_id=guild_id if scope == "channel" else None,
        content=content,
        created_by=created_by,
    )
    pin.source = "operator"
    session.add(pin)
    await session.flush()
    await session.refresh(pin)
    return _record(pin), True


async def get_pin(session: AsyncSession, pin_id: int) -> PinRecord | None:
    """One pin, locked until the transaction ends (a removal decides on what it deletes)."""
    pin = await session.scalar(select(Pin).where(Pin.id == pin_id).with_for_update())
    return _record(pin) if pin is not None else None


async def remove_pin(session: AsyncSession, pin_id: int) -> PinRecord | None:
    """Delete one pin; the deleted row, or None when there was no such pin."""
    query = (
        delete(Pin).where(Pin.id == pin_id).returning(Pin).execution_options(populate_existing=True)
    )
    gone = (await session.scalars(query)).one_or_none()
    return _record(gone) if gone is not None else None


async def pinned_facts(
    session: AsyncSession, channel_id: int, *, parent_id: int | None = None
) -> list[str]:
    """Global pins, then a thread's parent channel's, then this channel's, oldest first
    within each (at most MAX_PINS). A thread's own pins add to its parent's."""
    channels = [channel_id] if parent_id is None else [parent_id, channel_id]
    query = (
        select(Pin.content)
        .where(or_(Pin.scope == "global", (Pin.scope == "channel") & Pin.channel_id.in_(channels)))
        .order_by((Pin.scope == "channel").asc(), (Pin.channel_id == channel_id).asc(), Pin.id)
        .limit(MAX_PINS)
    )
    return list((await session.scalars(query)).all())


async def delete_by_creator(session: AsyncSession, user_id: int) -> int:
    """Delete the pins the person wrote (an erasure: their words)."""
    result = await session.execute(delete(Pin).where(Pin.created_by == user_id).returning(Pin.id))
    return len(result.all())


async def replace_mentions(session: AsyncSession, user_id: int, token: str) -> int:
    """Replace the person's mentions in other pins (a small table)."""
    return await replace_mentions_in(session, Pin.content, user_id, token)
