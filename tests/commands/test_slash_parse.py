"""The slash front end reads an interaction into the very command values the text parser
makes (pure): one command core, whichever front end gave the command."""

from __future__ import annotations

from typing import Any

import pytest

from app.commands.definitions import application_commands
from app.commands.parser import Command, Usage, parse_command
from app.commands.slash import memory_choices, slash_command, used
from app.discord.fake_interactions import FakeInteractions
from app.frames.events import CommandData
from app.memory.records import MemoryRecord

BOT = 1000


def interaction_data(command: str, values: dict[str, Any] | None = None, **kw: Any) -> CommandData:
    """What Discord's client sends for ``command`` (built from the registered definitions)."""
    ids = iter(range(10**17, 10**18))
    fake = FakeInteractions(BOT, lambda: next(ids), lambda kind, data: None)
    fake.commands[None] = [
        {**c, "id": str(n)} for n, c in enumerate(application_commands(), start=1)
    ]
    d = fake.use(command, values, user_id=7, channel_id=8, guild_id=9, **kw)
    return CommandData.model_validate(d["data"])


@pytest.mark.parametrize(
    ("typed", "slash", "values"),
    [
        ("!memory show", "/memory show", {}),
        ("!memory show all", "/memory show", {"all": True}),
        ("!memory search green tea", "/memory search", {"words": "green tea"}),
        ("!memory why 12", "/memory why", {"id": 12}),
        ("!memory forget 12", "/memory forget", {"memory": "12"}),
        ("!memory forget all", "/memory forget", {"memory": "all"}),
        ("!memory export", "/memory export", {}),
        ("!memory pause", "/memory pause", {}),
        ("!memory resume", "/memory resume", {}),
        ("!forgetme", "/forgetme", {}),
        ("!bot memory <@55>", "/bot memory", {"user": "55"}),
        ("!bot forget-fact 3", "/bot forget-fact", {"id": 3}),
        ("!bot pin global Be kind.", "/bot pin", {"scope": "global", "fact": "Be kind."}),
        ("!bot unpin 4", "/bot unpin", {"id": 4}),
        ("!bot channel", "/bot channel show", {}),
        ("!bot channel mode free", "/bot channel mode", {"mode": "free"}),
        ("!bot channel persona Be brief.", "/bot channel persona", {"text": "Be brief."}),
        ("!bot channel persona clear", "/bot channel persona-clear", {}),
        ("!bot channel model small-model", "/bot channel model", {"name": "small-model"}),
        ("!bot channel model clear", "/bot channel model-clear", {}),
        ("!bot usage", "/bot usage", {}),
    ],
)
def test_a_slash_command_is_the_same_command_as_its_text_form(
    typed: str, slash: str, values: dict[str, Any]
) -> None:
    expected: Command | None = parse_command(typed, BOT)
    assert expected is not None and not isinstance(expected, Usage)
    assert slash_command(interaction_data(slash, values)) == expected


def test_a_channel_option_names_the_channel_the_setting_is_for() -> None:
    data = interaction_data("/bot channel mode", {"mode": "off", "channel": "77"})
    command = slash_command(data)
    assert getattr(command, "channel_id", None) == 77


def test_a_forget_that_is_neither_an_id_nor_all_gets_the_usage_line() -> None:
    assert isinstance(slash_command(interaction_data("/memory forget", {"memory": "cats"})), Usage)


def test_forget_offers_all_then_the_memories_as_strings_and_why_offers_integers() -> None:
    memories = [MemoryRecord(5, 7, "Alice likes tea " * 10)]
    forgetting = used(interaction_data("/memory forget", {"memory": "a"}, focused="memory"))
    assert memory_choices(memories, forgetting)[0] == {
        "name": "all: forget every memory",
        "value": "all",
    }
    asking = used(interaction_data("/memory why", {"id": "5"}, focused="id"))
    [choice] = memory_choices(memories, asking)
    assert choice["value"] == 5 and len(choice["name"]) <= 100
