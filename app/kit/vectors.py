"""Embeddings as the stores keep them (pure): a text's vector, the space it lives in (which
model made it, how long it is, how queries were told from stored texts: vectors of two
spaces are never compared), and its forms in SQL and in a step record."""

from __future__ import annotations

import base64
import hashlib
import math
import struct
from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Embedding:
    values: tuple[float, ...]
    space: str

    def sql(self) -> str:
        """pgvector's text form (``CAST(:v AS halfvec)`` reads it)."""
        return "[" + ",".join(f"{v:.6g}" for v in self.values) + "]"

    def packed(self) -> str:
        """Compact (float32, base64) for a JSON record."""
        return base64.b64encode(struct.pack(f"<{len(self.values)}f", *self.values)).decode()

    @classmethod
    def unpacked(cls, packed: str, space: str) -> Embedding:
        raw = base64.b64decode(packed)
        return cls(struct.unpack(f"<{len(raw) // 4}f", raw), space)

    def cosine(self, other: Embedding) -> float:
        """Cosine similarity (0 for a zero vector); only within one space."""
        dot = sum(a * b for a, b in zip(self.values, other.values, strict=True))
        norms = math.hypot(*self.values) * math.hypot(*other.values)
        return dot / norms if norms else 0.0


def space_of(
    model: str, dimensions: int, input_type: str, prefixes: Sequence[str] = ("", "")
) -> str:
    """The name of a model's space as the rows record it: "<model>@<dimensions>/<input type>",
    with a short digest of the prefixes when they are part of the request."""
    name = f"{model}@{dimensions}/{input_type}"
    if any(prefixes):
        digest = hashlib.sha256("\x00".join(prefixes).encode()).hexdigest()[:8]
        name += f":{digest}"
    return name
