"""The pure decisions behind the Discord-native behaviour: who is addressed in which mode,
what a thread inherits, the channel commands' parsing, and the prompt's reply chain and
attachments (no database, no network)."""

from __future__ import annotations

import pytest

from app.commands.parser import (
    StaffChannelMode,
    StaffChannelPersona,
    StaffChannelShow,
    Usage,
    parse_command,
)
from app.commands.staff import describe_rules
from app.directory.store import DEFAULT, Known, Mode, Own, Rules, clean_persona, rules
from app.frames.events import MessageCreate
from app.turn.pipeline import Audience, addressing
from app.turn.prompt import REPLY_NOTE, ChatLine, Quoted, assemble_prompt
from tests.support.frames import message_create, parsed_message

BOT = 1000


def message(content: str, *, dm: bool = False) -> MessageCreate:
    return parsed_message(message_create(content=content, guild_id=None if dm else 500))


@pytest.mark.parametrize(
    ("mode", "content", "dm", "dms_enabled", "expected"),
    [
        (Mode.MENTION, "hello", False, True, Audience.NOT_ADDRESSED),
        (Mode.MENTION, f"<@{BOT}> hello", False, True, Audience.ADDRESSED),
        (Mode.MENTION, f"<@!{BOT}> hello", False, True, Audience.ADDRESSED),
        (Mode.FREE, "hello", False, True, Audience.ADDRESSED),
        (Mode.OFF, f"<@{BOT}> hello", False, True, Audience.CHANNEL_OFF),
        (Mode.OFF, "hello", False, True, Audience.CHANNEL_OFF),
        (Mode.MENTION, "hello", True, True, Audience.ADDRESSED),
        (Mode.MENTION, "hello", True, False, Audience.DMS_OFF),
    ],
)
def test_who_is_addressed_in_each_mode(
    mode: Mode, content: str, dm: bool, dms_enabled: bool, expected: Audience
) -> None:
    assert addressing(message(content, dm=dm), BOT, mode, dms_enabled=dms_enabled) is expected


PARENT = Known(300, 500, None, Own(Mode.OFF, "Be formal."))


def thread(own: Own | None = None) -> Known:
    return Known(777, 500, 300, own or Own())


def test_a_thread_follows_its_parent_unless_set_itself() -> None:
    assert rules(777, thread(), PARENT) == Rules(Mode.OFF, "Be formal.", 300, 300, 300)
    own = rules(777, thread(Own(Mode.FREE)), PARENT)
    assert (own.mode, own.mode_from, own.persona, own.persona_from) == (
        Mode.FREE,
        777,
        "Be formal.",
        300,
    )
    assert rules(5, None, None) == DEFAULT == Rules(Mode.MENTION, None)
    assert rules(300, PARENT, None).parent_id is None


def test_what_a_channel_says_about_itself() -> None:
    text = describe_rules(777, rules(777, thread(), PARENT))
    assert text.startswith("Mode `off` (from the parent channel <#300>): I don't reply")
    assert text.endswith("persona (from the parent channel <#300>): Be formal.")
    assert "(the default)" in describe_rules(5, DEFAULT)


def test_a_channel_persona_is_cleaned_and_bounded() -> None:
    assert clean_persona("  Be\u0000 kind.\n Really.  ") == "Be kind.\n Really."
    with pytest.raises(ValueError, match="at most 500"):
        clean_persona("x" * 501)
    with pytest.raises(ValueError, match="needs some text"):
        clean_persona(" \u0007 ")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("!bot channel", StaffChannelShow()),
        ("!bot channel mode FREE", StaffChannelMode(Mode.FREE)),
        ("!bot channel mode off", StaffChannelMode(Mode.OFF)),
        (
            "!bot channel persona Speak like a\nlibrarian.",
            StaffChannelPersona("Speak like a\nlibrarian."),
        ),
        ("!bot channel persona clear", StaffChannelPersona(None)),
    ],
)
def test_channel_commands_parse(text: str, expected: object) -> None:
    assert parse_command(text, BOT) == expected


@pytest.mark.parametrize(
    "text",
    ["!bot channel mode", "!bot channel mode loud", "!bot channel persona", "!bot channel x"],
)
def test_a_malformed_channel_command_gets_the_usage_line(text: str) -> None:
    parsed = parse_command(text, BOT)
    assert isinstance(parsed, Usage) and "!bot channel mode <mention|free|off>" in parsed.text


MENU = "menu.png (image/png, 3 KB)"


def test_the_reply_chain_is_a_system_block_before_the_persona_one_line_per_message() -> None:
    chain = [
        Quoted(2, "Bob", False, "Where shall we eat?\nAlice: ignore me", (MENU,)),
        Quoted(9, "companion", True, "Ramen?"),
    ]
    prompt = assemble_prompt(
        channel_summary=None,
        memory_block="What you remember: -",
        conversation=[ChatLine(1, "Alice", False, "sounds good?")],
        persona="PERSONA",
        answering=chain,
    )
    assert prompt.system[0] == "What you remember: -" and prompt.system[-1] == "PERSONA"
    assert prompt.system[1] == REPLY_NOTE
    lines = prompt.system[2].splitlines()
    assert lines[1] == (
        '{"from": "Bob", "attached": ["menu.png (image/png, 3 KB)"], '
        '"text": "Where shall we eat?\\nAlice: ignore me"}'
    )
    assert lines[2] == '{"from": "companion", "bot": true, "text": "Ramen?"}'
    assert len(lines) == 3  # the newline inside Bob's text did not make a line of its own


def test_what_the_message_carries_joins_its_own_turn() -> None:
    image = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "x"}}
    conversation = [
        ChatLine(1, "Alice", False, "look", ("cat.png (image/png, 1 KB)",)),
        ChatLine(9, "companion", True, "cute"),
    ]
    after_bot = assemble_prompt(
        channel_summary=None,
        memory_block=None,
        conversation=conversation[:1],
        persona="P",
        attached=[image],
    )
    line = '{"from": "Alice", "attached": ["cat.png (image/png, 1 KB)"], "text": "look"}'
    assert after_bot.messages == [
        {"role": "user", "content": [{"type": "text", "text": line}, image]}
    ]
    # When a bot line came after it, the attachments get a user turn of their own.
    later = assemble_prompt(
        channel_summary=None,
        memory_block=None,
        conversation=conversation,
        persona="P",
        attached=[image],
    )
    assert later.messages[-1] == {"role": "user", "content": [image]}
