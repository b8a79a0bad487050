"""The API process: `uvicorn app.main:app` — /webhook, admin endpoints, health, metrics.

On SIGTERM it drains: /readyz fails at once, and uvicorn (which stops listening the moment
it is told) is told only API_DRAIN_S later, so load balancers and Kubernetes stop sending
before the socket closes; requests in flight then finish as uvicorn shuts down."""

from __future__ import annotations

import asyncio
import logging
import signal
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from functools import partial
from types import FrameType

from fastapi import FastAPI, Request, Response
from fastapi.exception_handlers import http_exception_handler
from fastapi.responses import JSONResponse
from prometheus_client import CONTENT_TYPE_LATEST, Gauge, generate_latest
from sqlalchemy import text
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Receive, Scope, Send

from app.admin.auth import AdminGate
from app.admin.channels import router as channels_router
from app.admin.endpoints import router as admin_router
from app.admin.errors import install as install_admin_errors
from app.admin.inbox import router as inbox_admin_router
from app.admin.people import router as people_router
from app.admin.usage import router as usage_router
from app.config import Settings, get_settings
from app.db import create_engine, create_session_factory
from app.directory.store import rules_cache
from app.inbound.endpoints import routes as inbound_routes
from app.inbound.store import enqueue_events
from app.inbound.writer import InboxWriter
from app.kit.arqueue import create_queue, version_redis
from app.kit.heap import freeze_startup_objects
from app.kit.logs import configure_logging
from app.kit.probes import start_probe_server

log = logging.getLogger("app.main")
IN_FLIGHT = Gauge("http_requests_in_flight", "HTTP requests this API process is serving now")


def create_app(settings: Settings | None = None) -> FastAPI:
    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        if settings is None:
            configure_logging()
        config = settings or get_settings()
        pooled = config.database_transaction_pooling
        engine = create_engine(config.database_url, pool_size=10, transaction_pooling=pooled)
        queue = create_queue(config.redis_target)
        inbox = InboxWriter(
            config.database_url, partial(enqueue_events, queue), transaction_pooling=pooled
        )
        versions = version_redis(config.redis_target)
        app.state.settings = config
        app.state.gateway_tokens = gateway_tokens(config)
        app.state.engine = engine
        app.state.sessions = create_session_factory(engine)
        app.state.queue = queue
        app.state.inbox = inbox
        app.state.channel_rules = rules_cache(versions)  # for its invalidation
        app.state.draining = False
        inbox.start()
        if settings is None:  # the API process itself, not an app a test or the dev stack made
            _drain_on_sigterm(app, config.api_drain_s)
            freeze_startup_objects()
        # Prometheus may reach this port alone: GET /metrics and /healthz, nothing else.
        port = config.api_metrics_port
        probes = start_probe_server(port, lambda: True) if port else None
        try:
            yield
        finally:
            if probes is not None:
                probes.shutdown()
                probes.server_close()
            await inbox.stop()
            await versions.aclose(close_connection_pool=True)
            await queue.close()
            await engine.dispose()

    app = FastAPI(title="Companion bot", version="0.1.0", lifespan=lifespan)
    app.add_middleware(InFlight)
    app.router.routes.extend(inbound_routes)
    install_admin_errors(app)
    app.include_router(admin_router)
    app.include_router(people_router)
    app.include_router(inbox_admin_router)
    app.include_router(channels_router)
    app.include_router(usage_router)
    app.add_middleware(AdminGate)
    app.add_exception_handler(StarletteHTTPException, _unreadable_body_is_422)
    app.add_api_route("/healthz", healthz, methods=["GET"], tags=["health"])
    app.add_api_route("/readyz", readyz, methods=["GET"], tags=["health"])
    app.add_api_route("/metrics", metrics, methods=["GET"], include_in_schema=False)
    return app


def _drain_on_sigterm(app: FastAPI, delay_s: float) -> None:
    """Take SIGTERM before uvicorn does: readiness fails now, uvicorn shuts down after
    ``delay_s`` (a second SIGTERM: at once). Runs inside uvicorn's signal capture, which
    puts the original handlers back when it ends."""
    uvicorn_exit = signal.getsignal(signal.SIGTERM)
    if not callable(uvicorn_exit):
        return
    loop = asyncio.get_running_loop()

    def on_sigterm(signum: int, frame: FrameType | None) -> None:
        if app.state.draining:
            uvicorn_exit(signum, frame)
            return
        app.state.draining = True
        log.info("API draining: /readyz fails from now", extra={"closing_in_s": delay_s})
        loop.call_soon_threadsafe(loop.call_later, delay_s, uvicorn_exit, signum, None)

    signal.signal(signal.SIGTERM, on_sigterm)


class InFlight:
    """Counts the HTTP requests being served (``http_requests_in_flight``, what to scale
    the API on besides CPU); plain ASGI, so the webhook pays two gauge updates."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        IN_FLIGHT.inc()
        try:
            await self.app(scope, receive, send)
        finally:
            IN_FLIGHT.dec()


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
    """Postgres and Redis are reachable, and the process is not draining."""
    if request.app.state.draining:
        return JSONResponse({"ready": False, "draining": True}, status_code=503)
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
