"""MEM-07 staff commands: review and edit memories, and manage operator pins.

Each command runs with the `Authority` of its author where it was given: staff reach only
what belongs to that guild, operators also what reaches past it; a refused command is
answered and changes nothing. Every memory read and change is in `memory_log` with actor
`staff` (the staff member's id in the reason); every act, and every refusal, is also a
structured log line with the actor's id, guild and authority.
A memory listing is shown to the staff member alone (by DM, or in a slash command's ephemeral
answer), never into the (possibly public) channel.
Channel settings (mode, persona) change through the channel directory, whose change every
worker's cache sees at its next lookup."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass

from app.commands.answer import Answer, Part
from app.commands.authority import Authority, Refusal
from app.commands.invocation import Invocation
from app.commands.parser import (
    StaffChannelMode,
    StaffChannelModel,
    StaffChannelPersona,
    StaffChannelShow,
    StaffCommand,
    StaffForgetFact,
    StaffMemory,
    StaffPin,
    StaffUnpin,
    StaffUsage,
)
from app.commands.render import preview
from app.commands.usage import report_usage
from app.db import unit_of_work
from app.directory import store as directory
from app.directory.store import Mode, Rules
from app.memory import store
from app.memory.records import Why
from app.pins import store as pins
from app.services import Services
from app.vocabulary import Actor

logger = logging.getLogger(__name__)

ACTOR = Actor.STAFF
LISTING_LIMIT = 100


def format_staff_listing(user_id: int, memories: Sequence[tuple[int, str, str]], more: int) -> str:
    """Pure: the DM text for `!bot memory <user>` — id, source and preview per memory."""
    if not memories:
        return f"User `{user_id}` has no memories."
    lines = [f"`{mid}` ({source}) {preview(content)}" for mid, content, source in memories]
    tail = f"\n…and {more} older not shown." if more > 0 else ""
    return (
        f"Memories of user `{user_id}` (id, source, note):\n"
        + "\n".join(lines)
        + tail
        + "\n\nDelete one with `!bot forget-fact <id>`."
    )


def listing_sent(user_id: int, count: int) -> str:
    noun = "memory" if count == 1 else "memories"
    return f"I've sent you a DM with the {count} {noun} of `{user_id}`."


LISTING_DM_FAILED = (
    "I couldn't send you a direct message, so I won't list those memories here. "
    "Allow DMs from this server's members and try again."
)


def _reason(who: Invocation, what: str) -> str:
    return f"staff {who.user_id}: {what}"


def log_act(authority: Authority, event: str, **details: object) -> None:
    """The structured log line of one staff or operator act (or refusal)."""
    logger.info(
        event,
        extra={
            "staff_id": authority.actor_id,
            "guild_id": authority.guild_id,
            "authority": authority.level,
            **details,
        },
    )


async def run_staff_command(
    services: Services,
    command: StaffCommand,
    who: Invocation,
    answer: Answer,
    authority: Authority,
) -> None:
    """Run one staff command with its author's authority here, and answer it."""
    if (refused := authority.refusal(command)) is not None:
        log_act(authority, "staff command refused", command=type(command).__name__)
        await answer.say(refused)
        return
    act = Act(services, who, answer, authority)
    match command:
        case StaffMemory(user_id=user_id):
            await _list_memories(act, user_id)
        case StaffForgetFact(memory_id=memory_id):
            await _forget_fact(act, memory_id)
        case StaffPin(scope=scope, fact=fact):
            await _pin(act, scope, fact)
        case StaffUnpin(pin_id=pin_id):
            await _unpin(act, pin_id)
        case StaffChannelShow() | StaffChannelMode() | StaffChannelPersona() | StaffChannelModel():
            await _channel_setting(act, command)
        case StaffUsage():
            log_act(authority, "staff usage shown")
            await answer.say(await report_usage(services, authority.guild_id))


@dataclass(frozen=True, slots=True)
class Act:
    """One staff command being carried out: what it may use, who gave it and where, how it
    is answered, and with what authority."""

    services: Services
    who: Invocation
    answer: Answer
    authority: Authority


async def _list_memories(act: Act, user_id: int) -> None:
    services, authority = act.services, act.authority
    why = Why(ACTOR, _reason(act.who, "!bot memory"))
    async with unit_of_work(services.sessions) as session:
        # Staff of one guild see what was learned there (an operator in a DM sees all).
        here = authority.reach
        shown = await store.recent(session, user_id, why, limit=LISTING_LIMIT, place=here)
        full = len(shown) == LISTING_LIMIT
        total = await store.count(session, user_id, place=here) if full else len(shown)
    log_act(authority, "staff memory listing", user_id=user_id, shown=len(shown))
    listing = format_staff_listing(
        user_id, [(m.id, m.content, m.source) for m in shown], total - len(shown)
    )
    await act.answer.show(
        [Part(listing)],
        sent=listing_sent(user_id, len(shown)),
        undeliverable=LISTING_DM_FAILED,
    )


async def _forget_fact(act: Act, memory_id: int) -> None:
    services, authority = act.services, act.authority
    trigger = f"staff:{act.who.trigger_id}"
    why = Why(ACTOR, _reason(act.who, "!bot forget-fact"), trigger=trigger)
    async with unit_of_work(services.sessions) as session:
        # Under the owner's lock, as the write path takes it: no extraction races the delete.
        gone = await store.delete_one(session, memory_id, why, visible_in=authority.reach)
    if gone is None:
        await act.answer.say(f"No memory with id {memory_id} was found.")
        return
    log_act(authority, "staff forget-fact", memory_id=memory_id, user_id=gone.user_id)
    await act.answer.say(f"Deleted memory {memory_id} (it belonged to `{gone.user_id}`).")


async def _pin(act: Act, scope: pins.Scope, fact: str) -> None:
    services, authority, who = act.services, act.authority, act.who
    if len(fact) > pins.MAX_PIN_CHARS:
        await act.answer.say(f"A pin can be at most {pins.MAX_PIN_CHARS} characters.")
        return
    channel_id = who.channel_id if scope == "channel" else None
    async with unit_of_work(services.sessions) as session:
        pin, created = await pins.add_pin(
            session,
            scope=scope,
            channel_id=channel_id,
            content=fact,
            created_by=who.user_id,
            guild_id=who.guild_id,
        )
    log_act(
        authority,
        "staff pin added" if created else "staff pin already present",
        pin_id=pin.id,
        scope=scope,
        channel_id=channel_id,
        chars=len(fact),
    )
    where = "for this channel" if scope == "channel" else "for every channel"
    await act.answer.say(f"Pinned {where} with id {pin.id}.")


async def _unpin(act: Act, pin_id: int) -> None:
    services, authority = act.services, act.authority
    async with unit_of_work(services.sessions) as session:
        pin = await pins.get_pin(session, pin_id)
        refused = authority.unpin_refusal(pin.scope, pin.guild_id) if pin else None
        if pin is not None and refused is None:
            await pins.remove_pin(session, pin_id)
    if pin is None:
        await act.answer.say(f"No pin with id {pin_id} was found.")
        return
    if refused is not None:
        log_act(authority, "staff unpin refused", pin_id=pin_id, scope=pin.scope)
        await act.answer.say(refused)
        return
    log_act(
        authority, "staff pin removed", pin_id=pin_id, scope=pin.scope, channel_id=pin.channel_id
    )
    await act.answer.say(f"Removed pin {pin_id}.")


# --- channel settings ------------------------------------------------------------------------

MODE_MEANINGS = {
    Mode.MENTION: "I answer here when I'm mentioned (the default)",
    Mode.FREE: "I treat every message here as addressed to me (often a reaction is my answer)",
    Mode.OFF: "I don't reply, react or run tasks here; commands still work",
}
CHANNEL_ONLY = (
    "Channel settings belong to a server channel: run this in the channel (or thread) you "
    "want to change."
)


def describe_rules(channel_id: int, rules: Rules) -> str:
    """Pure: what holds in a channel, and where each setting comes from."""

    def where(source: int | None) -> str:
        if source is None:
            return "the default"
        return "set here" if source == channel_id else f"from the parent channel <#{source}>"

    persona = (
        f"persona ({where(rules.persona_from)}): {rules.persona}"
        if rules.persona
        else "no channel persona"
    )
    model = f"\nchat model ({where(rules.model_from)}): `{rules.model}`" if rules.model else ""
    return (
        f"Mode `{rules.mode}` ({where(rules.mode_from)}): {MODE_MEANINGS[rules.mode]}.\n"
        f"{persona}{model}"
    )


_SETTING = {StaffChannelMode: "mode", StaffChannelPersona: "persona", StaffChannelModel: "model"}
ChannelSetting = StaffChannelShow | StaffChannelMode | StaffChannelPersona | StaffChannelModel


def model_refusal(name: str, allowed: Sequence[str]) -> str | None:
    """Pure: why a channel may not use ``name`` (not one of CHAT_MODELS), or None."""
    if not allowed:
        return "Not changed: no chat models may be chosen per channel here (CHAT_MODELS is empty)."
    if name not in allowed:
        listed = ", ".join(f"`{m}`" for m in allowed)
        return f"Not changed: `{name}` is not one of the chat models allowed here ({listed})."
    return None


async def _channel_setting(act: Act, command: ChannelSetting) -> None:
    who, authority = act.who, act.authority
    if who.guild_id is None:
        await act.answer.say(CHANNEL_ONLY)
        return
    channel_id = command.channel_id or who.channel_id
    if isinstance(command, StaffChannelPersona) and command.text is not None:
        try:
            directory.clean_persona(command.text)
        except ValueError as exc:
            await act.answer.say(f"Not changed: {exc}.")
            return
    if isinstance(command, StaffChannelModel) and command.name is not None:
        refused = model_refusal(command.name, act.services.settings.chat_models)
        if refused is not None:
            log_act(authority, "staff command refused", command=type(command).__name__)
            await act.answer.say(refused)
            return
    async with act.services.sessions() as session:
        known, _ = await directory.rules_for(session, channel_id)
    if known is not None and known.guild_id not in (None, who.guild_id):
        # A slash command's channel option names a channel: one of this guild's only.
        log_act(authority, "staff command refused", command=type(command).__name__)
        await act.answer.say(Refusal.OTHER_GUILD_CHANNEL)
        return
    if isinstance(command, StaffChannelShow):
        log_act(authority, "staff channel settings shown", channel_id=channel_id)
    else:
        await _change_channel(act, channel_id, command)
    async with act.services.sessions() as session:
        _, rules = await directory.rules_for(session, channel_id)
    await act.answer.say(describe_rules(channel_id, rules))


async def _change_channel(
    act: Act, channel_id: int, command: StaffChannelMode | StaffChannelPersona | StaffChannelModel
) -> None:
    async with unit_of_work(act.services.sessions) as session:
        await directory.update_own(
            session,
            channel_id,
            guild_id=act.who.guild_id,
            by=act.who.user_id,
            mode=command.mode if isinstance(command, StaffChannelMode) else directory.KEEP,
            persona=command.text if isinstance(command, StaffChannelPersona) else directory.KEEP,
            model=command.name if isinstance(command, StaffChannelModel) else directory.KEEP,
        )
    await act.services.channel_rules.invalidate()
    log_act(
        act.authority,
        "staff channel setting changed",
        channel_id=channel_id,
        setting=_SETTING[type(command)],
    )
