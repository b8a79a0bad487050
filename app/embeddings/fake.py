"""FakeEmbeddings: a local OpenAI-compatible embeddings API for tests where meaning does not
matter (the real wire format, on a real port; meaning is the local model's job).

    fake = FakeEmbeddings(dimensions=32)
    async with serve(fake.app) as url:   # EMBEDDINGS_BASE_URL = url + "/v1"
        ...

A text's vector is deterministic: its tokens (app/kit/tokens.py) hashed into the dimensions,
so texts sharing words are close and a text always gets the same vector (``vector(text)``).
``down`` answers 503, ``latency`` delays every answer, ``garbage`` answers 200 with a body
that is not an embeddings answer, ``dimensions_answered`` sends vectors of another length;
``api_key`` demands ``Authorization: Bearer <key>``. ``requests`` logs every body. Like OpenAI's,
an answer reports its ``usage``: here one token per word of the texts (``tokens(texts)``),
unless ``reports_usage`` is off (as some local servers answer)."""

from __future__ import annotations

import asyncio
import hashlib
import math
from dataclasses import dataclass, field
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

from app.kit.tokens import tokenize

MODEL = "fake-embedding"


def hashed_vector(text: str, dimensions: int) -> list[float]:
    """The fake's vector of ``text``: each token adds ±1 at a dimension its hash picks."""
    values = [0.0] * dimensions
    for token in tokenize(text) or [text]:
        digest = hashlib.sha256(token.encode()).digest()
        sign = 1.0 if digest[4] & 1 else -1.0
        values[int.from_bytes(digest[:4], "little") % dimensions] += sign
    norm = math.sqrt(sum(v * v for v in values)) or 1.0
    return [v / norm for v in values]


@dataclass
class FakeEmbeddings:
    dimensions: int = 32
    api_key: str | None = None
    down: bool = False
    latency: float = 0.0
    garbage: bool = False
    dimensions_answered: int | None = None
    reports_usage: bool = True
    requests: list[dict[str, Any]] = field(default_factory=list)

    @staticmethod
    def tokens(texts: list[str]) -> int:
        """The tokens an answer for ``texts`` reports."""
        return sum(max(1, len(tokenize(text))) for text in texts)

    def vector(self, text: str) -> list[float]:
        return hashed_vector(text, self.dimensions)

    def texts(self) -> list[str]:
        """Every text received, in order."""
        return [t for body in self.requests for t in body.get("input") or []]

    @property
    def app(self) -> FastAPI:
        app = FastAPI()

        @app.post("/v1/embeddings")
        async def embeddings(request: Request) -> JSONResponse:
            return await self._answer(request)

        return app

    async def _answer(self, request: Request) -> JSONResponse:
        expected = None if self.api_key is None else f"Bearer {self.api_key}"
        if expected is not None and request.headers.get("authorization") != expected:
            return JSONResponse({"error": {"message": "invalid api key"}}, status_code=401)
        body: dict[str, Any] = await request.json()
        self.requests.append(body)
        if self.latency:
            await asyncio.sleep(self.latency)
        if self.down:
            return JSONResponse({"error": {"message": "unavailable"}}, status_code=503)
        if self.garbage:
            return JSONResponse({"object": "list", "data": "nope"})
        texts = body.get("input")
        if not isinstance(texts, list) or not texts:
            return JSONResponse({"error": {"message": "input must be a list"}}, status_code=400)
        length = self.dimensions_answered or self.dimensions
        data = [
            {"object": "embedding", "index": i, "embedding": hashed_vector(t, length)}
            for i, t in enumerate(texts)
        ]
        answer: dict[str, Any] = {"object": "list", "data": data, "model": MODEL}
        if self.reports_usage:
            spent = self.tokens(texts)
            answer["usage"] = {"prompt_tokens": spent, "total_tokens": spent}
        return JSONResponse(answer)
