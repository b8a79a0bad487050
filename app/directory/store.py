"""The channel directory: the one owner of `channels`. Where each channel hangs (a thread's
parent, from THREAD_CREATE/UPDATE or GET /channels/{id}) and what operators set for it (its
mode and its persona addition). A thread follows its parent's settings unless set itself;
`rules` is that decision, pure."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum, StrEnum

from redis.asyncio import Redis
from sqlalchemy import case, func, select, update
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.ext.asyncio import AsyncSession

from app.kit.clock import utcnow
from app.kit.versioned import RedisVersion, VersionedCache
from app.models.channels import Channel

MAX_PERSONA_CHARS = 500
PUBLIC_THREAD = 11  # Discord's channel type for a thread that does not say which it is
# Bumped after every committed change (settings, a thread's parent): each process's cache
# of channel rules is dropped at its next lookup.
VERSION_KEY = "channel-directory:version"


class Mode(StrEnum):
    MENTION = "mention"  # seed 002 step 6: a turn only when the bot is addressed (default)
    FREE = "free"  # every human message in the channel is addressed
    OFF = "off"  # no reply, reaction or task; the log, observations and commands go on


@dataclass(frozen=True, slots=True)
class Own:
    """What was set on one channel itself (None: not set here)."""

    mode: Mode | None = None
    persona: str | None = None
    model: str | None = None


@dataclass(frozen=True, slots=True)
class Known:
    """A channel as the directory knows it. ``placed``: whether it is known to be a thread
    (with its parent) or not one; a row holding only settings is not placed yet."""

    channel_id: int
    guild_id: int | None
    parent_id: int | None
    own: Own
    placed: bool = True


@dataclass(frozen=True, slots=True)
class Rules:
    """What holds in a channel: its own settings, else its parent's, else the default."""

    mode: Mode = Mode.MENTION
    persona: str | None = None
    parent_id: int | None = None  # the parent channel, for a thread
    mode_from: int | None = None  # the channel the mode was set on (None: the default)
    persona_from: int | None = None
    model: str | None = None  # the channel's chat model (None: CHAT_MODEL)
    model_from: int | None = None


DEFAULT = Rules()


def rules(channel_id: int, known: Known | None, parent: Known | None) -> Rules:
    """Pure: a thread's own setting wins, then its parent's, then the default."""
    if known is None:
        return DEFAULT
    mode, mode_from = Mode.MENTION, None
    persona, persona_from = None, None
    model, model_from = None, None
    for source in (parent, known):  # the thread itself last: its own settings win
        if source is None:
            continue
        if source.own.mode is not None:
            mode, mode_from = source.own.mode, source.channel_id
        if source.own.persona is not None:
            persona, persona_from = source.own.persona, source.channel_id
        if source.own.model is not None:
            model, model_from = source.own.model, source.channel_id
    return Rules(mode, persona, known.parent_id, mode_from, persona_from, model, model_from)


def clean_persona(text: str) -> str:
    """A channel persona as stored: trimmed, control characters out (newlines kept).
    ValueError when it is empty or over MAX_PERSONA_CHARS."""
    kept = "".join(c for c in text if c in "\n\t" or c.isprintable()).strip()
    if not kept:
        raise ValueError("a channel persona needs some text")
    if len(kept) > MAX_PERSONA_CHARS:
        raise ValueError(f"a channel persona is at most {MAX_PERSONA_CHARS} characters")
    return kept


def rules_cache(redis: Redis | None) -> VersionedCache[int, Rules]:
    """A process's cache of channel rules, shared-invalidated through ``redis``."""
    return VersionedCache(RedisVersion(redis, VERSION_KEY) if redis is not None else None)


# --- reads -----------------------------------------------------------------------------------


def _known(row: Channel) -> Known:
    own = Own(Mode(row.mode) if row.mode else None, row.persona, row.model)
    return Known(row.id, row.guild_id, row.parent_id, own, placed=row.type is not None)


async def known(session: AsyncSession, channel_id: int) -> Known | None:
    row = await session.get(Channel, channel_id)
    return _known(row) if row is not None else None


async def rules_for(session: AsyncSession, channel_id: int) -> tuple[Known | None, Rules]:
    """The channel as known (None: never seen) and the rules that hold there."""
    here = await known(session, channel_id)
    parent = await known(session, here.parent_id) if here and here.parent_id else None
    return here, rules(channel_id, here, parent)


async def any_mode_set(session: AsyncSession, mode: Mode | None = None) -> bool:
    """Whether any channel has a mode of its own (which a thread might inherit); with
    ``mode``, that mode."""
    has = Channel.mode.is_not(None) if mode is None else Channel.mode == mode.value
    found = await session.scalar(select(Channel.id).where(has).limit(1))
    return found is not None


# --- writes ----------------------------------------------------------------------------------


async def record_channel(
    session: AsyncSession,
    channel_id: int,
    *,
    guild_id: int | None,
    parent_id: int | None,
    name: str | None = None,
    name_by: int | None = None,
    type_: int,
) -> bool:
    """Record where a channel hangs (``type_``: Discord's channel type; settings untouched)
    and its name, with whose words the name is (``name_by``: a thread's owner); True when
    that changed what the directory knew."""
    before = await session.get(Channel, channel_id)
    statement = insert(Channel).values(
        id=channel_id,
        guild_id=guild_id,
        parent_id=parent_id,
        name=name,
        name_by=name_by if name is not None else None,
        type=type_,
    )
    renamed = statement.excluded.name.is_not(None)
    await session.execute(
        statement.on_conflict_do_update(
            index_elements=[Channel.id],
            set_={
                "guild_id": func.coalesce(statement.excluded.guild_id, Channel.guild_id),
                "parent_id": statement.excluded.parent_id,
                "name": func.coalesce(statement.excluded.name, Channel.name),
                "name_by": case((renamed, statement.excluded.name_by), else_=Channel.name_by),
                "type": statement.excluded.type,
                "updated_at": func.now(),
            },
        )
    )
    return before is None or before.parent_id != parent_id or before.type is None


class Keep(Enum):
    """Leave this setting as it is (an update that names only the other one)."""

    KEEP = "keep"


KEEP = Keep.KEEP


async def update_own(
    session: AsyncSession,
    channel_id: int,
    *,
    guild_id: int | None,
    by: int | None,
    mode: Mode | Keep | None = KEEP,
    persona: str | Keep | None = KEEP,
    model: str | Keep | None = KEEP,
) -> Own:
    """Change what is set on the channel itself (None: not set here, so a thread follows its
    parent and a channel the default); its place in the directory is kept. The caller
    invalidates every process's cached rules once this is committed."""
    values: dict[str, object] = {"settings_by": by, "settings_at": utcnow()}
    if not isinstance(mode, Keep):
        values["mode"] = mode.value if mode is not None else None
    if not isinstance(persona, Keep):  # its author stays with it through later mode changes
        values["persona"] = clean_persona(persona) if persona is not None else None
        values["persona_by"] = by if persona is not None else None
    if not isinstance(model, Keep):  # checked against CHAT_MODELS by the caller
        values["model"] = model
    statement = insert(Channel).values(id=channel_id, guild_id=guild_id, **values)
    row = (
        await session.scalars(
            statement.on_conflict_do_update(
                index_elements=[Channel.id],
                set_={
                    **values,
                    "guild_id": func.coalesce(Channel.guild_id, statement.excluded.guild_id),
                    "updated_at": func.now(),
                },
            )
            .returning(Channel)
            .execution_options(populate_existing=True)
        )
    ).one()
    return _known(row).own


async def forget_setter(session: AsyncSession, user_id: int) -> int:
    """An erasure: the channel personas the person wrote (their words, whoever changed the
    channel's mode since) are cleared, and their id leaves the settings; a mode they set
    stays (a setting, not their words). How many personas went. The caller invalidates the
    cached rules once committed."""
    result = await session.execute(
        update(Channel)
        .where(Channel.persona_by == user_id)
        .values(persona=None, persona_by=None, updated_at=func.now())
        .returning(Channel.id)
    )
    await session.execute(
        update(Channel).where(Channel.settings_by == user_id).values(settings_by=None)
    )
    return len(result.all())


async def forget_names(session: AsyncSession, user_id: int) -> int:
    """An erasure: the names of the threads the person started (their words) are blanked;
    how many."""
    result = await session.execute(
        update(Channel)
        .where(Channel.name_by == user_id)
        .values(name=None, name_by=None, updated_at=func.now())
        .returning(Channel.id)
    )
    return len(result.all())
