"""A local fake of Jina search and reader, for tests and offline development.

Serve ``app`` and point JINA_SEARCH_URL at ``<base>/search`` and JINA_READER_URL at
``<base>/reader``. Every request is recorded; a wrong bearer key gets 401."""

from __future__ import annotations

from dataclasses import dataclass, field

from fastapi import FastAPI, Request
from fastapi.responses import PlainTextResponse


@dataclass(frozen=True)
class JinaCall:
    kind: str  # "search" | "read"
    target: str  # the query, or the URL read
    authorization: str | None
    accept: str | None


@dataclass
class FakeJina:
    api_key: str = "jina-test-key"
    results: dict[str, str] = field(default_factory=dict)  # query -> result text
    pages: dict[str, str] = field(default_factory=dict)  # url -> page text
    requests: list[JinaCall] = field(default_factory=list)

    @property
    def app(self) -> FastAPI:
        app = FastAPI()

        @app.get("/search/")
        async def search(request: Request) -> PlainTextResponse:
            query = request.query_params.get("q", "")
            return self._answer(request, "search", query, self.results.get(query))

        @app.get("/reader/{target:path}")
        async def read(target: str, request: Request) -> PlainTextResponse:
            url = f"{target}?{request.url.query}" if request.url.query else target
            return self._answer(request, "read", url, self.pages.get(url))

        return app

    def _answer(
        self, request: Request, kind: str, target: str, text: str | None
    ) -> PlainTextResponse:
        auth = request.headers.get("authorization")
        self.requests.append(JinaCall(kind, target, auth, request.headers.get("accept")))
        if auth != f"Bearer {self.api_key}":
            return PlainTextResponse("unauthorized", status_code=401)
        if text is None:
            return PlainTextResponse("not found", status_code=404)
        return PlainTextResponse(text)
