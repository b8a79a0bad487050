"""The prompt side of relevance recall (pure): what recall ranks by, dated notes in the memory
block, and older messages opening the conversation with their dates, attributed as the rest."""

from __future__ import annotations

from datetime import UTC, datetime

from app.channel.exchange import Exchange, Line
from app.memory.recall import CONTEXT_WEIGHT, exchange_query, recall_query, render_memory_block
from app.memory.records import MemoryRecord
from app.turn.prompt import EARLIER_NOTE, REPLY_NOTE, ChatLine, assemble_prompt

JAN, MAR = datetime(2026, 1, 5, 23, tzinfo=UTC), datetime(2026, 3, 1, tzinfo=UTC)


def weights(query: object) -> dict[str, float]:
    return dict(zip(query.terms, query.weights, strict=True))  # type: ignore[attr-defined]


def test_a_reply_ranks_by_the_message_and_the_last_three_lines_at_lower_weight() -> None:
    query = recall_query("how is Miso?", ["too old", "cats", "and tuna", "she likes boxes"])
    low = CONTEXT_WEIGHT
    assert 0 < low < 1
    assert weights(query) == {
        "how": 1.0,
        "is": 1.0,
        "miso": 1.0,
        "cat": low,
        "and": low,
        "tuna": low,
        "she": low,
        "like": low,
        "box": low,
    }


def test_the_write_path_ranks_by_the_speakers_lines_first() -> None:
    exchange = Exchange(
        1,
        "alice",
        (
            Line(2, "bob", False, "bob talks golf"),
            Line(1, "alice", False, "my golf"),
            Line(9, "bot", True, "nice golf cat"),
        ),
    )
    assert weights(exchange_query(exchange)) == {
        "my": 1.0,
        "golf": 1.0,
        "bob": CONTEXT_WEIGHT,
        "talk": CONTEXT_WEIGHT,
        "nice": CONTEXT_WEIGHT,
        "cat": CONTEXT_WEIGHT,
    }


def test_dated_notes_show_when_they_were_learned_and_last_updated() -> None:
    notes = [
        MemoryRecord(1, 5, "has a cat named Miso", created_at=JAN, updated_at=MAR),
        MemoryRecord(2, 5, "likes tea", created_at=MAR, updated_at=MAR),
    ]
    block = render_memory_block(notes, {5: "Alice"}, dated=True)
    assert block is not None
    assert "About Alice:\n- [2026-01-05, updated 2026-03-01] has a cat named Miso\n" in block
    assert block.endswith("- [2026-03-01] likes tea")
    assert "date you learned it" in block
    assert "- has a cat named Miso" in (render_memory_block(notes, {5: "Alice"}) or "")


def test_older_messages_open_the_conversation_dated_and_attributed() -> None:
    conversation = [
        ChatLine(2, "bob", False, "Miso knocked a glass over", said_at=JAN),
        ChatLine(9, "companion", True, "Oh no, poor glass!", said_at=JAN),
        ChatLine(3, "carol", False, "morning all"),
        ChatLine(1, "alice", False, "how is Miso?"),
    ]
    prompt = assemble_prompt(
        channel_summary=None, memory_block="notes", conversation=conversation, persona="P"
    )
    assert prompt.system == ["notes", f"{REPLY_NOTE}\n\n{EARLIER_NOTE}", "P"]  # persona last
    assert prompt.messages == [
        {
            "role": "user",
            "content": '{"from": "bob", "date": "2026-01-05", "text": "Miso knocked a glass over"}',
        },
        {"role": "assistant", "content": "[2026-01-05] Oh no, poor glass!"},
        {
            "role": "user",
            "content": '{"from": "carol", "text": "morning all"}\n'
            '{"from": "alice", "text": "how is Miso?"}',
        },
    ]


def test_without_older_messages_the_prompt_is_as_before() -> None:
    prompt = assemble_prompt(
        channel_summary=None,
        memory_block=None,
        conversation=[ChatLine(1, "alice", False, "hi")],
        persona="P",
    )
    assert prompt.system == [REPLY_NOTE, "P"]
    assert prompt.messages == [{"role": "user", "content": '{"from": "alice", "text": "hi"}'}]
