"""The demo brain recalls by meaning with the local embedding model: of the notes the bot
recalled, its reply speaks of the one nearest in meaning to what was said."""

from __future__ import annotations

import json

import httpx

from app.chat.fake import Delay, Text
from app.dev.local_embeddings import LocalEmbeddings
from app.dev.models import demo_anthropic, nearest_by

NOTES = [
    "Alice repainted the kitchen in May",
    "Alice has a young dog named Biscuit",
    "Alice prefers tea over coffee in the morning",
]


def reply_request(said: str) -> dict[str, object]:
    block = "What you remember from earlier conversations:\n\nAbout Alice:\n" + "\n".join(
        f"- [2026-01-01] {note}" for note in NOTES
    )
    line = json.dumps({"from": "Alice", "text": said})
    return {
        "system": [{"type": "text", "text": block}],
        "messages": [{"role": "user", "content": line}],
    }


async def test_the_demo_reply_speaks_of_the_note_nearest_in_meaning(
    local_model: LocalEmbeddings,
) -> None:
    async with httpx.AsyncClient() as http:
        brain = demo_anthropic(0, nearest_by(local_model.embedder(http), timeout_s=5.0))
        assert brain.responder is not None
        answer = await brain.responder(reply_request("my pup chewed the sofa again"))  # type: ignore[misc]
    assert isinstance(answer, Text) and not isinstance(answer, Delay)
    assert "Biscuit" in answer.text


async def test_without_the_model_the_demo_reply_takes_the_first_note_as_before() -> None:
    brain = demo_anthropic(0)
    assert brain.responder is not None
    answer = await brain.responder(reply_request("my pup chewed the sofa again"))  # type: ignore[misc]
    assert isinstance(answer, Text) and "repainted the kitchen" in answer.text
