"""The channel log: the one owner of `messages`. Both sides of every conversation, edits
and deletes applied, each write idempotent; readers get plain `LoggedMessage`s."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import Row, Select, delete, func, select, text, update
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm import aliased

from app.channel.exchange import Line, Place
from app.discord.attachments import described, stored_names
from app.frames.events import MessageCreate, MessageUpdate, mentions_in
from app.kit import embedded
from app.kit.embedded import EmbeddedTable, Waiting
from app.kit.relevance import Fusion, Query, Ranking, SearchTable, ranked
from app.kit.sql import any_array, mention_pattern
from app.kit.tokens import tokenize
from app.kit.vectors import Embedding
from app.models.messages import Message, MessageTombstone

CONTEXT_SIZE = 20
# Older-conversation recall (MEMORY_RECALL=relevant): only what bears on the message, a
# telling word shared. Chosen on bench/recall.py's tuning half (`--tune`).
MESSAGES = SearchTable("messages", "created_at", "channel_id")
RANKING = Ranking(min_telling=0.4, prior=0.5, rare=0.01, idf_power=2.0, sample=300, probe_rows=15)
# By meaning too (EMBEDDINGS_BASE_URL set), chosen on the same tuning half: chatty lines are
# many and alike, so only those clearly nearer than the rest count.
FUSION = Fusion(k=5.0, words=1.0, meaning=1.0, sample=2000, candidates=50, min_meaning=3.0)
# Messages whose text may have a vector: live, recallable (never words said while their
# author paused learning), not blank.
VECTORS = EmbeddedTable(
    "messages",
    live="deleted_at IS NULL AND recallable AND content <> ''",
    guard="deleted_at IS NULL AND recallable",
)


@dataclass(frozen=True, slots=True)
class LoggedMessage:
    id: int
    channel_id: int
    guild_id: int | None
    author_id: int
    author_name: str
    is_bot: bool
    content: str
    reply_to_id: int | None
    created_at: datetime
    deleted: bool = False
    attachments: tuple[str, ...] = ()  # what was attached, by name (e.g. "a.png (image/png, 3 KB)")


def line_of(message: LoggedMessage) -> Line:
    """A logged message as a line of an exchange (with its ids, for provenance)."""
    return Line(
        message.author_id,
        message.author_name,
        message.is_bot,
        message.content,
        message_id=message.id,
        channel_id=message.channel_id,
        attachments=message.attachments,
    )


def _plain(row: Message | Row[Any]) -> LoggedMessage:
    """A message as the log holds it, from its row (ORM or a prebuilt statement's)."""
    return LoggedMessage(
        id=row.id,
        channel_id=row.channel_id,
        guild_id=row.guild_id,
        author_id=row.author_id,
        author_name=row.author_name,
        is_bot=row.is_bot,
        content=row.content,
        reply_to_id=row.reply_to_id,
        created_at=row.created_at,
        deleted=row.deleted_at is not None,
        attachments=described(row.attachments or []),
    )


# --- writes -----------------------------------------------------------------------------------


def _mentioned(message: MessageCreate) -> list[int]:
    """Everyone the message mentions: Discord's list and the text's own `<@id>` tokens."""
    return sorted({user.id for user in message.mentions} | mentions_in(message.content))


async def arrived_changed(session: AsyncSession, message: MessageCreate) -> bool:
    """Whether the log holds, or will hold, the message other than the event says: a delete
    or edit of it arrived first (its tombstone waits, or a log write already applied it).
    One statement, so one snapshot: the write that applies a tombstone removes it in the same
    commit, and the read sees either the tombstone or the message it changed."""
    params = {"id": message.id, "content": message.content}
    return bool(await session.scalar(_ARRIVED_CHANGED, params))


# Built once: a mention's turn reads it before its first question.
_ARRIVED_CHANGED = text(
    "SELECT EXISTS (SELECT FROM message_tombstones WHERE message_id = :id) "
    "OR EXISTS (SELECT FROM messages WHERE id = :id "
    "AND (deleted_at IS NOT NULL OR content <> :content))"
)


def as_logged(message: MessageCreate) -> LoggedMessage:
    """``message`` as ``log_message`` will hold it when no delete or edit came first: what a
    reader that runs before the log write stands in for it."""
    return LoggedMessage(
        id=message.id,
        channel_id=message.channel_id,
        guild_id=message.guild_id,
        author_id=message.author.id,
        author_name=message.author_name,
        is_bot=message.author.bot,
        content=message.content,
        reply_to_id=message.reply_to_id,
        created_at=message.timestamp,
        attachments=described(stored_names(message.attachments)),
    )


async def log_message(
    session: AsyncSession, message: MessageCreate, *, recallable: bool = True
) -> LoggedMessage:
    """Append a message (once) and return it as logged: a delete or edit that arrived before
    it (a tombstone) is applied, so a deleted message is logged deleted and an edited one
    with its newest text. ``recallable`` False (its author paused learning): older-
    conversation recall never brings it back, nor the bot's reply to it."""
    tombstone = await session.get(MessageTombstone, message.id, populate_existing=True)
    content = message.content
    if tombstone is not None and tombstone.content is not None:
        content = tombstone.content
    await session.execute(
        insert(Message)
        .values(
            id=message.id,
            channel_id=message.channel_id,
            guild_id=message.guild_id,
            author_id=message.author.id,
            author_name=message.author_name,
            is_bot=message.author.bot,
            content=content,
            search_tokens=tokenize(content),
            recallable=recallable,
            reply_to_id=message.reply_to_id,
            mention_ids=sorted(set(_mentioned(message)) | mentions_in(content)),
            created_at=message.timestamp,
            edited_at=tombstone.edited_at if tombstone is not None else None,
            deleted_at=tombstone.deleted_at if tombstone is not None else None,
            attachments=stored_names(message.attachments),
        )
        .on_conflict_do_nothing(index_elements=[Message.id])
    )
    if tombstone is not None:
        await session.delete(tombstone)
    row = await session.get(Message, message.id, populate_existing=True)
    assert row is not None
    return _plain(row)


async def log_bot_message(
    session: AsyncSession,
    *,
    message_id: int,
    channel_id: int,
    guild_id: int | None,
    bot_user_id: int,
    bot_name: str,
    content: str,
    reply_to_id: int | None,
    created_at: datetime,
) -> None:
    """The bot's own message; recallable only as far as the message it answers is."""
    answered = select(Message.recallable).where(Message.id == reply_to_id).scalar_subquery()
    await session.execute(
        insert(Message)
        .values(
            id=message_id,
            channel_id=channel_id,
            guild_id=guild_id,
            author_id=bot_user_id,
            author_name=bot_name,
            is_bot=True,
            content=content,
            search_tokens=tokenize(content),
            recallable=func.coalesce(answered, True),
            reply_to_id=reply_to_id,
            mention_ids=sorted(mentions_in(content)),
            created_at=created_at,
        )
        .on_conflict_do_nothing(index_elements=[Message.id])
    )


async def apply_edit(session: AsyncSession, edit: MessageUpdate, at: datetime) -> bool:
    """Apply an edit's new content, in Discord's order (its ``edited_timestamp``, else ``at``,
    when it arrived): an edit older than the text logged changes nothing, so a late delivery
    never brings back words their author edited away. Partial updates without content change
    nothing; an edit of a message not logged yet is kept (the newest one) until the message
    arrives. True when the edit is now the message's text (applied, or kept as the newest)."""
    if edit.content is None:
        return False
    edited_at = edit.edited_timestamp or at
    not_newer = Message.edited_at.is_(None) | (Message.edited_at <= edited_at)
    result = await session.execute(
        update(Message)
        .where(Message.id == edit.id, Message.deleted_at.is_(None), not_newer)
        .values(
            content=edit.content,
            edited_at=edited_at,
            mention_ids=sorted(mentions_in(edit.content)),
            search_tokens=tokenize(edit.content),
        )
        .returning(Message.id)
    )
    if result.scalar_one_or_none() is not None:
        return True
    if await session.get(Message, edit.id) is None:
        return await _keep_early_edit(session, edit, edited_at)
    return False


async def _keep_early_edit(session: AsyncSession, edit: MessageUpdate, edited_at: datetime) -> bool:
    """Keep the edit until its message arrives, unless a newer one is kept already."""
    author = edit.author.id if edit.author is not None else None
    statement = insert(MessageTombstone).values(
        message_id=edit.id,
        channel_id=edit.channel_id,
        author_id=author,
        content=edit.content,
        edited_at=edited_at,
    )
    newer = MessageTombstone.edited_at.is_(None) | (MessageTombstone.edited_at <= edited_at)
    result = await session.execute(
        statement.on_conflict_do_update(
            index_elements=[MessageTombstone.message_id],
            set_={
                "content": statement.excluded.content,
                "edited_at": statement.excluded.edited_at,
                "author_id": func.coalesce(
                    statement.excluded.author_id, MessageTombstone.author_id
                ),
            },
            where=newer,
        ).returning(MessageTombstone.message_id)
    )
    return result.scalar_one_or_none() is not None


async def mark_deleted(
    session: AsyncSession, ids: Sequence[int], at: datetime, *, channel_id: int
) -> int:
    """Mark logged messages deleted; a delete of a message not logged yet is kept until the
    message arrives (then logged as deleted). How many logged messages were marked."""
    result = await session.execute(
        update(Message)
        .where(Message.id.in_(ids), Message.deleted_at.is_(None))
        .values(deleted_at=at, embedding=None, embedding_space=None)  # its vector goes too
        .returning(Message.id)
    )
    marked = len(result.all())
    unknown = set(ids) - await existing_ids(session, ids)
    if unknown:
        statement = insert(MessageTombstone).values(
            [{"message_id": i, "channel_id": channel_id, "deleted_at": at} for i in sorted(unknown)]
        )
        await session.execute(
            statement.on_conflict_do_update(
                index_elements=[MessageTombstone.message_id],
                set_={"deleted_at": statement.excluded.deleted_at, "content": None},
            )
        )
    return marked


async def prune_tombstones(session: AsyncSession, *, older_than: timedelta) -> int:
    """Tombstones live as long as the de-duplication window: a message that never came."""
    result = await session.execute(
        delete(MessageTombstone)
        .where(MessageTombstone.received_at < func.now() - older_than)
        .returning(MessageTombstone.message_id)
    )
    return len(result.all())


# --- reads ------------------------------------------------------------------------------------


async def get_message(session: AsyncSession, message_id: int) -> LoggedMessage | None:
    row = await session.get(Message, message_id)
    return _plain(row) if row is not None else None


async def messages_by_id(session: AsyncSession, ids: Collection[int]) -> dict[int, LoggedMessage]:
    """These messages as logged (deleted ones included, marked)."""
    if not ids:
        return {}
    rows = await session.scalars(select(Message).where(Message.id.in_(list(ids))))
    return {row.id: _plain(row) for row in rows}


async def message_authors(session: AsyncSession, ids: Collection[int]) -> dict[int, int]:
    """Message id → author id, for the messages the log knows."""
    if not ids:
        return {}
    rows = await session.execute(
        select(Message.id, Message.author_id).where(Message.id.in_(list(ids)))
    )
    return {message_id: author_id for message_id, author_id in rows.tuples()}


async def recent_messages(
    session: AsyncSession,
    channel_id: int,
    *,
    limit: int = CONTEXT_SIZE,
    before_id: int | None = None,
) -> list[LoggedMessage]:
    """The channel's last ``limit`` messages, oldest first, deleted ones excluded. A
    statement built once (a turn reads it before its first question: building and keying an
    ORM select each time cost more than the read)."""
    if before_id is None:
        rows = await session.execute(_RECENT, {"channel_id": channel_id, "limit": limit})
    else:
        params = {"channel_id": channel_id, "limit": limit, "before_id": before_id}
        rows = await session.execute(_RECENT_BEFORE, params)
    return [_plain(row) for row in reversed(rows.all())]


_SHOWN = (
    "SELECT id, channel_id, guild_id, author_id, author_name, is_bot, content, reply_to_id, "
    "created_at, deleted_at, attachments FROM messages "
    "WHERE channel_id = :channel_id AND deleted_at IS NULL {before}"
    "ORDER BY created_at DESC LIMIT :limit"
)
_RECENT = text(_SHOWN.format(before=""))
_RECENT_BEFORE = text(_SHOWN.format(before="AND id <= :before_id "))


_OLDER = (
    "deleted_at IS NULL AND recallable "
    "AND (created_at, id) < (CAST(:before_at AS timestamptz), CAST(:before_id AS bigint))"
)


async def older_relevant(
    session: AsyncSession,
    channel_id: int,
    *,
    before: LoggedMessage,
    query: Query,
    limit: int,
    ranking: Ranking = RANKING,
    meaning: Embedding | None = None,
    fusion: Fusion = FUSION,
) -> list[LoggedMessage]:
    """Up to ``limit`` live messages of this channel older than ``before`` (the oldest line
    of the context) that bear on ``query`` (and, given its vector, ``meaning``, on its
    meaning), oldest first. Never another channel's, never a deleted one, never one written
    while its author paused learning (or the bot's reply)."""
    if (query.empty and meaning is None) or limit <= 0:
        return []
    found = await ranked(
        session,
        MESSAGES,
        Message,
        where=_OLDER,
        bind={"before_at": before.created_at, "before_id": before.id},
        scope_id=channel_id,
        query=query,
        ranking=ranking,
        limit=limit,
        meaning=meaning,
        fusion=fusion,
    )
    return sorted((_plain(row) for row, _ in found), key=lambda m: (m.created_at, m.id))


# --- vectors (derived from the text: they go with it) ------------------------------------


async def waiting_embeddings(session: AsyncSession, space: str, *, limit: int) -> list[Waiting]:
    """Live messages without a vector of ``space`` (the back-fill's next batch)."""
    return await embedded.waiting(session, VECTORS, space, limit=limit)


async def store_embeddings(session: AsyncSession, rows: Sequence[tuple[Waiting, Embedding]]) -> int:
    """Their vectors, onto messages still live with the text they were made from."""
    return await embedded.store(session, VECTORS, rows)


async def embeddings_waiting(session: AsyncSession, space: str) -> int:
    return await embedded.count_waiting(session, VECTORS, space)


async def exchange_messages(
    session: AsyncSession,
    *,
    channel_id: int,
    trigger_message_id: int,
    reply_message_id: int | None,
    size: int,
) -> list[LoggedMessage]:
    """Up to ``size`` live messages, oldest first, ending at the reply (or the trigger).

    The trigger always stays in: if too many messages came between it and the reply, it
    takes the oldest slot."""
    anchors = await messages_by_id(
        session, [i for i in (reply_message_id, trigger_message_id) if i is not None]
    )
    anchors = {i: m for i, m in anchors.items() if m.channel_id == channel_id}
    end = anchors.get(reply_message_id or 0) or anchors.get(trigger_message_id)
    if end is None:
        return []
    query = (
        select(Message)
        .where(
            Message.channel_id == channel_id,
            Message.deleted_at.is_(None),
            (Message.created_at < end.created_at)
            | ((Message.created_at == end.created_at) & (Message.id <= end.id)),
        )
        .order_by(Message.created_at.desc(), Message.id.desc())
        .limit(size)
    )
    recent = [_plain(row) for row in reversed((await session.scalars(query)).all())]
    trigger = anchors.get(trigger_message_id)
    if trigger is not None and not trigger.deleted and trigger.id not in {m.id for m in recent}:
        recent = [trigger, *recent[-(size - 1) :]]
    return recent


async def live_messages(session: AsyncSession, ids: Collection[int]) -> list[LoggedMessage]:
    """These messages as they read now (edits applied, deleted ones left out), oldest first."""
    rows = await session.scalars(
        select(Message)
        .where(Message.id.in_(list(ids)), Message.deleted_at.is_(None))
        .order_by(Message.created_at, Message.id)
    )
    return [_plain(row) for row in rows]


def _newest_per_author(start: datetime, end: datetime, per_author: int) -> Select[tuple[Message]]:
    rank = (
        func.row_number()
        .over(
            partition_by=Message.author_id,
            order_by=(Message.created_at.desc(), Message.id.desc()),
        )
        .label("rank")
    )
    ranked = (
        select(Message, rank)
        .where(
            Message.created_at >= start,
            Message.created_at < end,
            Message.is_bot.is_(False),
            Message.deleted_at.is_(None),
        )
        .subquery()
    )
    newest = aliased(Message, ranked)
    return select(newest).where(ranked.c.rank <= per_author)


async def newest_human_messages(
    session: AsyncSession, *, start: datetime, end: datetime, per_author: int
) -> list[LoggedMessage]:
    """The window's live human messages, only each author's newest ``per_author``."""
    rows = await session.scalars(_newest_per_author(start, end, per_author))
    return [_plain(row) for row in rows]


async def last_messages(
    session: AsyncSession, *, start: datetime, end: datetime, limit: int
) -> list[LoggedMessage]:
    """The window's newest ``limit`` messages, both sides, oldest first; deleted ones never."""
    query = (
        select(Message)
        .where(
            Message.created_at >= start,
            Message.created_at < end,
            Message.deleted_at.is_(None),
        )
        .order_by(Message.created_at.desc(), Message.id.desc())
        .limit(limit)
    )
    return [_plain(row) for row in reversed((await session.scalars(query)).all())]


async def display_names(
    session: AsyncSession, channel_id: int, users: Collection[int]
) -> dict[int, str]:
    """Each user's newest display name in this channel's log."""
    if not users:
        return {}
    query = (
        select(Message.author_id, Message.author_name)
        .where(Message.channel_id == channel_id, Message.author_id.in_(list(users)))
        .order_by(Message.author_id, Message.created_at.desc())
        .distinct(Message.author_id)
    )
    return {author: name for author, name in (await session.execute(query)).tuples()}


async def place_of(session: AsyncSession, channel_id: int) -> Place | None:
    """Where a channel is (its guild, or a DM), as its logged messages say; None when the
    log has no message of it."""
    row = (
        await session.execute(
            select(Message.guild_id).where(Message.channel_id == channel_id).limit(1)
        )
    ).one_or_none()
    return Place(row[0]) if row is not None else None


async def addressed_recently(
    session: AsyncSession, user_ids: Collection[int], *, bot_user_id: int, since: datetime
) -> set[int]:
    """Which of these people addressed the bot since ``since``: a message mentioning it, or
    any message in a DM (as the turn decides whether it was addressed)."""
    if not user_ids:
        return set()
    mention = (Message.content.contains(f"<@{bot_user_id}>")) | (
        Message.content.contains(f"<@!{bot_user_id}>")
    )
    rows = await session.scalars(
        select(Message.author_id)
        .where(
            Message.author_id == any_array(user_ids),
            Message.created_at >= since,
            Message.guild_id.is_(None) | mention,
        )
        .distinct()
    )
    return set(rows)


# --- erasure (by identity: author, channel, reply, mention) and import ----------------------


async def author_batch(
    session: AsyncSession, user_id: int, *, after_id: int, limit: int
) -> list[int]:
    """The next ``limit`` ids of the person's messages after ``after_id`` (ascending)."""
    rows = await session.scalars(
        select(Message.id)
        .where(Message.author_id == user_id, Message.id > after_id)
        .order_by(Message.id)
        .limit(limit)
    )
    return list(rows)


async def names_of(session: AsyncSession, user_id: int) -> list[str]:
    """Every display name the person's logged messages carry."""
    rows = await session.scalars(
        select(Message.author_name).where(Message.author_id == user_id).distinct()
    )
    return list(rows)


async def names_others_used(
    session: AsyncSession, user_id: int, names: Collection[str]
) -> list[str]:
    """Which of these names (case-insensitively) some other author has written under."""
    if not names:
        return []
    folded = sorted({name.lower() for name in names})
    rows = await session.scalars(
        select(func.lower(Message.author_name))
        .where(
            func.lower(Message.author_name).in_(folded),
            Message.author_id != user_id,
        )
        .distinct()
    )
    return list(rows)


async def channels_of(session: AsyncSession, user_id: int) -> tuple[list[int], list[int]]:
    """The channels the person wrote in: (guild channels, DM channels)."""
    rows = await session.execute(
        select(Message.channel_id, Message.guild_id.is_(None))
        .where(Message.author_id == user_id)
        .distinct()
    )
    pairs = rows.tuples().all()
    return sorted(c for c, dm in pairs if not dm), sorted(c for c, dm in pairs if dm)


async def spoke_in_windows(
    session: AsyncSession, user_id: int, windows: Sequence[tuple[datetime, datetime]]
) -> set[int]:
    """Which of these windows (by index) hold a message of the person."""
    found: set[int] = set()
    for index, (start, end) in enumerate(windows):
        hit = await session.scalar(
            select(Message.id)
            .where(
                Message.author_id == user_id,
                Message.created_at >= start,
                Message.created_at < end,
            )
            .limit(1)
        )
        if hit is not None:
            found.add(index)
    return found


async def replies_to(session: AsyncSession, message_ids: Collection[int]) -> list[LoggedMessage]:
    """Every logged message that replies to one of these (the bot's and other people's)."""
    if not message_ids:
        return []
    rows = await session.scalars(
        select(Message).where(Message.reply_to_id == any_array(message_ids))
    )
    return [_plain(row) for row in rows]


async def blank(session: AsyncSession, message_ids: Collection[int]) -> int:
    """Blank the text of these messages (the bot's replies an erasure must not keep)."""
    if not message_ids:
        return 0
    result = await session.execute(
        update(Message)
        .where(Message.id == any_array(message_ids), Message.content != "")
        .values(content="", mention_ids=[])
        .returning(Message.id)
    )
    return len(result.all())


async def bot_replies_to(
    session: AsyncSession, trigger_ids: Collection[int], bot_user_id: int
) -> list[int]:
    """The bot's logged replies to these messages."""
    if not trigger_ids:
        return []
    rows = await session.scalars(
        select(Message.id).where(
            Message.reply_to_id == any_array(trigger_ids), Message.author_id == bot_user_id
        )
    )
    return list(rows)


async def delete_ids(session: AsyncSession, message_ids: Collection[int]) -> int:
    if not message_ids:
        return 0
    result = await session.execute(
        delete(Message).where(Message.id == any_array(message_ids)).returning(Message.id)
    )
    return len(result.all())


async def channel_batch(
    session: AsyncSession, channel_ids: Collection[int], *, limit: int
) -> list[int]:
    """Up to ``limit`` ids of messages in these DM channels (a person's DMs with the bot);
    a guild message is never among them."""
    if not channel_ids:
        return []
    rows = await session.scalars(
        select(Message.id)
        .where(Message.channel_id == any_array(channel_ids), Message.guild_id.is_(None))
        .limit(limit)
    )
    return list(rows)


async def mentioning_batch(
    session: AsyncSession, user_id: int, *, after_id: int, limit: int
) -> list[int]:
    """The next ``limit`` ids of messages that mention the person (found by the GIN index)."""
    rows = await session.scalars(
        select(Message.id)
        .where(Message.mention_ids.contains([user_id]), Message.id > after_id)
        .order_by(Message.id + 0)  # not along the primary key: through the GIN index
        .limit(limit)
    )
    return list(rows)


async def replace_mentions(
    session: AsyncSession, message_ids: Collection[int], user_id: int, token: str
) -> int:
    """Replace the person's mentions in these messages' text with ``token``."""
    if not message_ids:
        return 0
    result = await session.execute(
        update(Message)
        .where(Message.id == any_array(message_ids))
        .values(
            content=func.regexp_replace(Message.content, mention_pattern(user_id), token, "g"),
            mention_ids=func.array_remove(Message.mention_ids, user_id),
        )
        .returning(Message.id)
    )
    return len(result.all())


async def delete_tombstones(
    session: AsyncSession, *, author_id: int | None = None, message_ids: Collection[int] = ()
) -> int:
    """Early edits the person made (their text), or tombstones of these messages."""
    where = MessageTombstone.message_id == any_array(message_ids)
    if author_id is not None:
        where = where | (MessageTombstone.author_id == author_id)
    result = await session.execute(
        delete(MessageTombstone).where(where).returning(MessageTombstone.message_id)
    )
    return len(result.all())


async def existing_ids(session: AsyncSession, ids: Collection[int]) -> set[int]:
    rows = await session.scalars(select(Message.id).where(Message.id == any_array(ids)))
    return set(rows)


async def insert_many(session: AsyncSession, rows: Sequence[dict[str, Any]]) -> int:
    """Insert logged messages as given (an import); ones that exist by now are skipped."""
    if not rows:
        return 0
    tokenized = [{**row, "search_tokens": tokenize(str(row["content"]))} for row in rows]
    statement = insert(Message).on_conflict_do_nothing().returning(Message.id)
    return len((await session.execute(statement, tokenized)).all())
