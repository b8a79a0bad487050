"""Baselines served on the same uvicorn settings as the real API.

``bare_app``: returns the webhook's JSON and does nothing else (the stack's physical limit).
``durable_app``: the minimal durable handler — one INSERT … ON CONFLICT DO NOTHING committed
per request (bound by one WAL flush per request)."""

from __future__ import annotations

import json
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import asyncpg
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

bare_app = FastAPI()


@bare_app.get("/healthz")
async def bare_health() -> dict[str, str]:
    return {"status": "ok"}


@bare_app.post("/webhook")
async def bare_webhook(request: Request) -> JSONResponse:
    return JSONResponse({"status": "ok"})


@asynccontextmanager
async def _pool(app: FastAPI) -> AsyncIterator[None]:
    app.state.pool = await asyncpg.create_pool(os.environ["BENCH_PG_DSN"], min_size=10, max_size=20)
    yield
    await app.state.pool.close()


durable_app = FastAPI(lifespan=_pool)


@durable_app.get("/healthz")
async def durable_health() -> dict[str, str]:
    return {"status": "ok"}


@durable_app.post("/webhook")
async def durable_webhook(request: Request) -> JSONResponse:
    body = await request.body()
    event_id = json.loads(body)["d"]["id"]
    async with request.app.state.pool.acquire() as conn:
        status = await conn.execute(
            "INSERT INTO bench_inbox (id, payload) VALUES ($1, $2::jsonb) ON CONFLICT DO NOTHING",
            event_id,
            body.decode(),
        )
    return JSONResponse({"status": "ok" if status.endswith("1") else "duplicate"})
