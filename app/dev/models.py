"""The decision model and the chat model of the dev stack: the shipped decision service on
Anthropic when ANTHROPIC_API_KEY is set, otherwise the local fakes driven by the demo brain."""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable
from typing import Any, cast

from starlette.applications import Starlette
from starlette.routing import Mount
from starlette.types import ASGIApp

from app.chat.fake import Delay, FakeAnthropic, Reply, Text
from app.decision.fake import FakeJev
from app.dev import brain
from app.embeddings.base import Embedder, EmbeddingFailed

Rule = Callable[[dict[str, Any]], bool | float | str]
# The demo's replies take a moment, as a real model's do, so the typing indicator shows.
DEMO_REPLY_DELAY_S = 1.5

# The decision model's whole vocabulary (app/decision/vocabulary.py), each answered by a brain rule.
RULES: dict[str, Rule] = {
    "worth_keeping": lambda body: brain.worth_keeping(body["prompt"]),
    "memory_verdict": lambda body: brain.memory_verdict(body["prompt"]),
    "add_memory": lambda body: brain.add_memory(body["prompt"]),
    "emoji_enough": lambda body: brain.emoji_enough(body["prompt"]),
    "emoji_choice": lambda body: brain.emoji_choice(body["prompt"], body.get("options") or []),
    "is_correction": lambda body: brain.is_correction(body["prompt"]),
    "is_task": lambda body: False,
    "stale_keep": lambda body: "keep",
    "same_memory": lambda body: brain.same_memory(body["prompt"]),
}


def demo_jev(api_key: str) -> FakeJev:
    """FakeJev answering by the brain's rules, demanding the dev stack's JEV_API_KEY."""
    jev = FakeJev(api_key=api_key)
    for question, rule in RULES.items():
        # FakeJev looks answers up by its Question enum, a StrEnum: members compare and hash
        # as their wire names, so the wire names key the same entries without this module
        # depending on where the vocabulary lives.
        jev.answers[cast(Any, question)] = rule
    return jev


def _system_blocks(body: dict[str, Any]) -> list[str]:
    system = body.get("system") or []
    if isinstance(system, str):
        return [system]
    return [str(block.get("text", "")) for block in system if isinstance(block, dict)]


# Orders the memory block's notes by how near each is in meaning to what was said.
Nearest = Callable[[str, list[str]], Awaitable[list[str]]]


def demo_anthropic(
    reply_delay_s: float = DEMO_REPLY_DELAY_S, nearest: Nearest | None = None
) -> FakeAnthropic:
    """FakeAnthropic whose texts come from the brain (replies, memory notes, summaries);
    a reply arrives after ``reply_delay_s``. With ``nearest`` (the local embedding model)
    a reply speaks of the recalled note nearest in meaning to what was said."""

    async def answer(body: dict[str, Any]) -> Reply:
        messages = list(body.get("messages") or [])
        system = _system_blocks(body)
        if brain.request_kind(messages) != "reply":
            return Text(brain.chat_text(system, messages))
        notes = brain.remembered(system)
        if nearest is not None and notes:
            notes = await nearest(brain.newest_line(messages)[1], notes)
        text = Text(brain.reply(system, messages, notes))
        return Delay(reply_delay_s, text) if reply_delay_s > 0 else text

    return FakeAnthropic(responder=answer)


def nearest_by(embedder: Embedder, timeout_s: float) -> Nearest:
    """``nearest`` on an embedder: the notes by similarity to the text, as they were when the
    embedder does not answer."""

    async def order(said: str, notes: list[str]) -> list[str]:
        try:
            [query] = await embedder.queries([said or "?"], timeout_s=timeout_s)
            vectors = await embedder.documents(notes)
        except EmbeddingFailed:
            return notes
        ranked = sorted(zip(notes, vectors, strict=True), key=lambda n: -query.cosine(n[1]))
        return [note for note, _ in ranked]

    return order


def demo_models_app(jev: FakeJev, anthropic: FakeAnthropic) -> Starlette:
    """Both fakes on one local server: ``/jev`` (JEV_URL) and ``/anthropic`` (the SDK's
    base URL; it posts to ``/anthropic/v1/messages``)."""
    return Starlette(routes=[Mount("/jev", jev.app), Mount("/anthropic", anthropic.app)])


def real_jev_app(api_key: str) -> ASGIApp:
    """The shipped decision service (`uvicorn app.jev.main:app`), which reads its settings
    from the environment at startup: its key is the dev stack's generated JEV_API_KEY."""
    os.environ["JEV_API_KEY"] = api_key
    from app.jev.main import app

    return app
