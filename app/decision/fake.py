"""FakeJev: a local decision service for tests and offline runs (the real wire format).

    jev = FakeJev()
    jev.answers[Question.WORTH_KEEPING] = 0.9
    jev.answers[Question.MEMORY_VERDICT] = lambda body: (
        "update" if "coffee" in body["prompt"] else "keep"
    )
    async with serve(jev.app) as url: ...   # tests/support/servers.py

Unset questions get the conservative answer: booleans ``False``, probabilities ``0.0``,
choices the first option (👍 first in the palette, ``keep`` for verdicts and stale reviews).
An answer is written as given, so ``1.5`` or a choice outside the options reach the client
as they are. ``Raw(status, body)`` (or a callable returning one) sends any response at all;
``down = True`` answers 503 to everything; ``latency`` delays every answer (seconds);
``api_key`` makes it demand ``Authorization: Bearer <key>`` (401 otherwise).
Malformed requests get 422, like the real service. ``requests`` logs every body received."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response
from pydantic import ValidationError

from app.decision.base import DecisionAnswer
from app.decision.vocabulary import Kind, Question
from app.decision.wire import ANSWER_KEYS, DecideRequest, token_headers


@dataclass(frozen=True)
class Raw:
    """Any response: a JSON-able body, or a str sent verbatim (e.g. not JSON at all)."""

    status: int = 200
    body: Any = None


Reply = DecisionAnswer | Raw
Answer = Reply | Callable[[dict[str, Any]], Reply]


@dataclass
class FakeJev:
    answers: dict[Question, Answer] = field(default_factory=dict)
    down: bool = False
    latency: float = 0.0
    api_key: str | None = None
    # The tokens each answer reports in its headers, as the shipped service does; None
    # plays a service that does not say.
    tokens: tuple[int, int] | None = None
    requests: list[dict[str, Any]] = field(default_factory=list)
    arrivals: list[float] = field(default_factory=list)  # time.monotonic() of each request

    def asked(self, question: Question) -> list[dict[str, Any]]:
        """The request bodies received for one question, in order."""
        return [body for body in self.requests if body.get("question") == question.value]

    def asked_at(self, question: Question) -> list[float]:
        """When each request for one question arrived (``time.monotonic()``), in order."""
        pairs = zip(self.requests, self.arrivals, strict=True)
        return [at for body, at in pairs if body.get("question") == question.value]

    @property
    def app(self) -> FastAPI:
        app = FastAPI()

        @app.get("/healthz")
        async def healthz() -> dict[str, str]:
            return {"status": "ok"}

        @app.post("/v1/decide")
        async def decide(request: Request) -> Response:
            return await self._decide(request)

        return app

    async def _decide(self, request: Request) -> Response:
        expected = None if self.api_key is None else f"Bearer {self.api_key}"
        if expected is not None and request.headers.get("authorization") != expected:
            return JSONResponse({"detail": "unauthorized"}, status_code=401)
        raw = await request.body()
        try:
            body: dict[str, Any] = json.loads(raw)
        except ValueError:
            body = {"unparsed": raw.decode(errors="replace")}
        self.requests.append(body)
        self.arrivals.append(time.monotonic())
        if self.latency:
            await asyncio.sleep(self.latency)
        if self.down:
            return JSONResponse({"detail": "down"}, status_code=503)
        try:
            decide = DecideRequest.model_validate(body)
        except ValidationError as exc:
            return JSONResponse({"detail": exc.errors(include_url=False)}, status_code=422)
        response = _render(decide.kind, self._reply(decide, body))
        if self.tokens is not None and response.status_code == 200:
            response.headers.update(token_headers(*self.tokens))
        return response

    def _reply(self, decide: DecideRequest, body: dict[str, Any]) -> Reply:
        answer = self.answers.get(decide.question)
        if answer is None:
            return conservative(decide.kind, decide.options)
        return answer(body) if callable(answer) else answer


def conservative(kind: Kind, options: list[str] | None) -> DecisionAnswer:
    """What an unset question answers: the branch the bot takes anyway without an answer."""
    if kind is Kind.BOOLEAN:
        return False
    if kind is Kind.PROBABILITY:
        return 0.0
    return (options or [""])[0]


def _render(kind: Kind, reply: Reply) -> Response:
    if not isinstance(reply, Raw):
        return JSONResponse({ANSWER_KEYS[kind]: reply})
    if isinstance(reply.body, str):
        return Response(reply.body, status_code=reply.status, media_type="application/json")
    return JSONResponse(reply.body, status_code=reply.status)
