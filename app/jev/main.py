"""The decision service: ``uvicorn app.jev.main:app`` serves POST /v1/decide (its OpenAPI document).

Settings and the Anthropic client are built at startup (lifespan), so importing this module
needs no environment."""

from __future__ import annotations

import hmac
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import httpx2
from fastapi import FastAPI, Request, Response
from fastapi.responses import JSONResponse

from app.chat.base import ChatProvider
from app.chat.providers import decision_adapter
from app.decision.base import NoDecision
from app.decision.model import ModelDecider, ModelTimeout
from app.decision.wire import DecideRequest, answer_body, token_headers
from app.jev.settings import JevSettings, load_jev_settings
from app.kit.spend import spend_scope
from app.kit.tls import httpx2_tls

log = logging.getLogger("app.jev")

_ANSWERS: dict[int | str, dict[str, Any]] = {
    200: {"description": 'Exactly one of {"answer": bool}, {"probability": 0..1}, {"choice": …}'},
    401: {"description": "Missing or wrong bearer key (when JEV_API_KEY is set)"},
    502: {"description": "The model failed or its answer does not fit the request"},
    504: {"description": "The model timed out"},
}


def create_app(
    settings: JevSettings | None = None, *, provider: ChatProvider | None = None
) -> FastAPI:
    """Build the service. Without arguments, settings come from the environment at startup
    and the model's adapter is built (and closed) by the app itself."""

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        config = settings or load_jev_settings()
        if config.jev_api_key is None:
            log.warning(
                "JEV_ALLOW_NO_KEY is set: serving without JEV_API_KEY, anyone who can reach "
                "this port may call the model; for local development only"
            )
        async with httpx2.AsyncClient(verify=httpx2_tls()) as http:
            key = config.openai_api_key
            model = provider or decision_adapter(
                config.jev_provider,
                http,
                model=config.jev_model,
                timeout_s=config.jev_timeout_s,
                max_retries=config.jev_max_retries,
                openai_key=key.get_secret_value() if key else None,
                openai_base_url=config.openai_base_url,
            )
            app.state.decider = ModelDecider(
                model, model=config.jev_model, timeout_s=config.jev_timeout_s
            )
            app.state.api_key = config.jev_api_key
            yield

    app = FastAPI(title="Jev decision service", lifespan=lifespan)

    @app.middleware("http")
    async def require_key(
        request: Request, call_next: Callable[[Request], Awaitable[Response]]
    ) -> Response:
        # Checked before the body is read, so an unauthenticated caller learns nothing.
        if request.url.path != "/healthz" and not _authorized(request):
            return JSONResponse({"detail": "unauthorized"}, status_code=401)
        return await call_next(request)

    @app.get("/healthz")
    async def healthz() -> dict[str, str]:
        return {"status": "ok"}

    @app.post("/v1/decide", responses=_ANSWERS)
    async def decide(body: DecideRequest, request: Request) -> JSONResponse:
        decider: ModelDecider = request.app.state.decider
        try:
            with spend_scope() as spend:
                value = await decider.decide(body.question, body.prompt, body.options)
        except ModelTimeout as exc:
            log.warning("decision timed out", extra={"question": body.question.value})
            return JSONResponse({"detail": str(exc)}, status_code=504)
        except NoDecision as exc:
            log.warning(
                "decision failed",
                extra={"question": body.question.value, "outcome": exc.reason.value},
            )
            return JSONResponse({"detail": str(exc)}, status_code=502)
        log.info("decision", extra={"question": body.question.value, "answer": value})
        spent = spend.usage.values()
        tokens = token_headers(
            sum(p.input_tokens for p in spent), sum(p.output_tokens for p in spent)
        )
        return JSONResponse(answer_body(body.kind, value), headers=tokens)

    return app


def _authorized(request: Request) -> bool:
    expected = getattr(request.app.state, "api_key", None)
    if expected is None:
        return True
    scheme, _, token = request.headers.get("authorization", "").partition(" ")
    secret: str = expected.get_secret_value()
    return scheme.lower() == "bearer" and hmac.compare_digest(
        token.strip().encode(), secret.encode()
    )


app = create_app()
