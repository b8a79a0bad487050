"""A query's vector for recall and search: one call to the embedder within the query timeout;
on any failure no vector (recall and search then go by words alone), counted by why."""

from __future__ import annotations

import logging
from typing import Any

from prometheus_client import Counter

from app.embeddings.base import Embedder, EmbeddingFailed
from app.kit.tokens import without_markup
from app.kit.vectors import Embedding

log = logging.getLogger(__name__)

QUERY_VECTORS = Counter(
    "recall_query_vectors_total",
    "Query embeddings for recall and search: embedded, or why not (words alone then).",
    ["outcome"],
)
EMBEDDED = "embedded"


async def query_vector(
    embedder: Embedder | None, text: str, *, timeout_s: float
) -> Embedding | None:
    """``text`` (markup removed) as a query vector, or None: no embedder, nothing to embed,
    or the embedder failed (logged and counted, never raised)."""
    said = without_markup(text)
    if embedder is None or not said:
        return None
    try:
        [vector] = await embedder.queries([said], timeout_s=timeout_s)
    except EmbeddingFailed as exc:
        QUERY_VECTORS.labels(outcome=exc.failure.value).inc()
        log.warning("query not embedded: words alone", extra={"failure": exc.failure.value})
        return None
    QUERY_VECTORS.labels(outcome=EMBEDDED).inc()
    return vector


def recorded(vector: Embedding | None) -> dict[str, Any]:
    """A query vector as a step record (compact), or that there was none."""
    if vector is None:
        return {"vector": None}
    return {"vector": vector.packed(), "space": vector.space}


def from_record(record: dict[str, Any], space: str) -> Embedding | None:
    """The recorded vector, when there was one and it is of ``space`` (the model may have
    changed since)."""
    packed = record.get("vector")
    if not isinstance(packed, str) or record.get("space") != space:
        return None
    return Embedding.unpacked(packed, space)
