"""The API process: `uvicorn app.main:app` — /webhook, admin endpoints, health, metrics."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from functools import partial

from fastapi import FastAPI, Request, Response
from fastapi.exception_handlers import http_exception_handler
from fastapi.responses import JSONResponse
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from sqlalchemy import text
from starlette.exceptions import HTTPException as StarletteHTTPException

from app.admin.auth import AdminGate
from app.admin.endpoints import router as admin_router
from app.admin.inbox import router as inbox_admin_router
from app.admin.people import router as people_router
from app.config import Settings, get_settings
from app.db import create_engine, create_session_factory
from app.inbound.endpoints import routes as inbound_routes
from app.inbound.inbox import InboxWriter, enqueue_events
from app.kit.arqueue import create_queue
from app.kit.heap import freeze_startup_objects
from app.kit.logs import configure_logging


def create_app(settings: Settings | None = None) -> FastAPI:
    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        if settings is None:
            configure_logging()
        config = settings or get_settings()
        engine = create_engine(config.database_url, pool_size=10)
        queue = create_queue(config.redis_target)
        inbox = InboxWriter(config.database_url, partial(enqueue_events, queue))
        app.state.settings = config
        app.state.gateway_tokens = gateway_tokens(config)
        app.state.engine = engine
        app.state.sessions = create_session_factory(engine)
        app.state.queue = queue
        app.state.inbox = inbox
        inbox.start()
        if settings is None:  # the API process itself, not an app a test or the dev stack made
            freeze_startup_objects()
        try:
            yield
        finally:
            await inbox.stop()
            await queue.close()
            await engine.dispose()

    app = FastAPI(title="Companion bot", version="0.1.0", lifespan=lifespan)
    app.router.routes.extend(inbound_routes)
    app.include_router(admin_router)
    app.include_router(people_router)
    app.include_router(inbox_admin_router)
    app.add_middleware(AdminGate)
    app.add_exception_handler(StarletteHTTPException, _unreadable_body_is_422)
    app.add_api_route("/healthz", healthz, methods=["GET"], tags=["health"])
    app.add_api_route("/readyz", readyz, methods=["GET"], tags=["health"])
    app.add_api_route("/metrics", metrics, methods=["GET"], include_in_schema=False)
    return app


def gateway_tokens(config: Settings) -> tuple[bytes, ...]:
    """What /webhook accepts: GATEWAY_TOKEN, and GATEWAY_TOKEN_PREVIOUS during a rotation."""
    tokens = (config.gateway_token, config.gateway_token_previous)
    return tuple(token.get_secret_value().encode() for token in tokens if token is not None)


async def _unreadable_body_is_422(request: Request, exc: Exception) -> Response:
    """FastAPI answers 400 for a body it cannot even decode (e.g. not UTF-8); every other
    bad body is a documented 422, so this one is too."""
    assert isinstance(exc, StarletteHTTPException)
    if exc.status_code == 400 and exc.detail == "There was an error parsing the body":
        problem = {"type": "json_invalid", "loc": ["body"], "msg": "body is not UTF-8 JSON"}
        return JSONResponse({"detail": [problem]}, status_code=422)
    return await http_exception_handler(request, exc)


async def healthz() -> dict[str, str]:
    """The process is up."""
    return {"status": "ok"}


async def readyz(request: Request) -> JSONResponse:
    """Postgres and Redis are reachable."""
    checks: dict[str, str] = {}
    try:
        async with request.app.state.engine.connect() as conn:
            await conn.execute(text("SELECT 1"))
        checks["postgres"] = "ok"
    except Exception as exc:
        checks["postgres"] = type(exc).__name__
    checks["redis"] = "ok" if await request.app.state.queue.ping() else "unreachable"
    ready = all(value == "ok" for value in checks.values())
    return JSONResponse({"ready": ready, **checks}, status_code=200 if ready else 503)


async def metrics() -> Response:
    return Response(generate_latest(), media_type=CONTENT_TYPE_LATEST)


app = create_app()
