"""The embeddings seam: one ``Embedder`` the bot asks (queries and stored texts told apart),
and the failures every adapter maps its errors to."""

from __future__ import annotations

from collections.abc import Sequence
from enum import StrEnum
from typing import Protocol

from app.kit.vectors import Embedding


class Failure(StrEnum):
    """Why there are no vectors; the ``outcome`` label of the embedding metrics."""

    TIMEOUT = "timeout"  # no answer in time
    CONNECTION = "connection"  # the service could not be reached
    STATUS = "status"  # a non-200 answer
    MALFORMED = "malformed"  # not the OpenAI embeddings shape, or not one vector per text
    DIMENSIONS = "dimensions"  # vectors of another length than EMBEDDINGS_DIMENSIONS


class EmbeddingFailed(Exception):
    """No vectors this time; ``failure`` says why (never carries the texts)."""

    def __init__(self, failure: Failure, detail: str = "") -> None:
        super().__init__(f"{failure}: {detail}" if detail else str(failure))
        self.failure = failure


class Embedder(Protocol):
    """Turns texts into vectors of one space (``space``). Queries (what recall searches with)
    and documents (the memories and messages searched) may be embedded differently."""

    @property
    def space(self) -> str: ...

    async def queries(self, texts: Sequence[str], *, timeout_s: float) -> list[Embedding]:
        """One attempt within ``timeout_s`` (the turn waits for it); raises EmbeddingFailed."""
        ...

    async def documents(self, texts: Sequence[str]) -> list[Embedding]:
        """Any number of texts, in batches with retries; raises EmbeddingFailed."""
        ...
