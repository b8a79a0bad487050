"""The channel directory's rules (pure): a thread's own setting wins, then its parent's, then
the default; a persona is stored trimmed, within its limit."""

from __future__ import annotations

import pytest

from app.directory.store import MAX_PERSONA_CHARS, Known, Mode, Own, Rules, clean_persona, rules

GENERAL, THREAD = 11, 12


def test_an_unknown_channel_gets_the_default_mention_mode() -> None:
    assert rules(GENERAL, None, None) == Rules()


def test_a_thread_follows_its_parent_unless_set_itself() -> None:
    parent = Known(GENERAL, 1, None, Own(Mode.FREE, "Be brief."))
    thread = Known(THREAD, 1, GENERAL, Own())
    own = Known(THREAD, 1, GENERAL, Own(mode=Mode.OFF))

    assert rules(THREAD, thread, parent) == Rules(Mode.FREE, "Be brief.", GENERAL, GENERAL, GENERAL)
    assert rules(THREAD, own, parent) == Rules(Mode.OFF, "Be brief.", GENERAL, THREAD, GENERAL)


def test_a_persona_is_trimmed_and_refused_when_empty_or_too_long() -> None:
    assert clean_persona("  Be formal.\x07\n") == "Be formal."
    with pytest.raises(ValueError, match="needs some text"):
        clean_persona(" \x00 ")
    with pytest.raises(ValueError, match="at most"):
        clean_persona("x" * (MAX_PERSONA_CHARS + 1))
