"""Admin errors that carry their HTTP answer: each declares its status and body model, one
handler renders them, and ``responses`` lists them in a route's OpenAPI entry. An endpoint
raises; it never builds an error response by hand."""

from __future__ import annotations

from typing import Any, ClassVar

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel

from app.admin.schemas import (
    AlreadyRanBody,
    AlreadyRolledBackBody,
    ContentRedactedBody,
    ErrorBody,
    NotDeadBody,
    NotQueuedBody,
)


class AdminError(Exception):
    """An answer other than success: ``status`` with ``body`` (a ``model`` instance)."""

    status: ClassVar[int]
    model: ClassVar[type[BaseModel]]
    description: ClassVar[str]

    def __init__(self, body: BaseModel) -> None:
        super().__init__(self.description)
        self.body = body


class NotFound(AdminError):
    status, model, description = 404, ErrorBody, "no such thing"

    def __init__(self, detail: str) -> None:
        super().__init__(ErrorBody(detail=detail))


class ModelNotAllowed(AdminError):
    # Not 422: that answer is the request validation's, with its own body.
    status, model, description = 400, ErrorBody, "the model is not one of CHAT_MODELS"

    def __init__(self) -> None:
        super().__init__(ErrorBody(detail="the model is not one of CHAT_MODELS"))


class RunAlreadyRolledBack(AdminError):
    status, model, description = 409, AlreadyRolledBackBody, "the run is already rolled back"

    def __init__(self, run_id: int) -> None:
        super().__init__(AlreadyRolledBackBody(run_id=run_id))


class RunContentRedacted(AdminError):
    status, model = 410, ContentRedactedBody
    description = (
        "the run's ledger text was removed by LEDGER_CONTENT_DAYS: refused, nothing changed"
    )

    def __init__(self, run_id: int) -> None:
        super().__init__(ContentRedactedBody(run_id=run_id))


class DayAlreadyRan(AdminError):
    status, model, description = 409, AlreadyRanBody, "today already has a live run"

    def __init__(self, run_id: int) -> None:
        super().__init__(AlreadyRanBody(run_id=run_id))


class RunNotQueued(AdminError):
    status, model, description = 503, NotQueuedBody, "run created, queue unreachable"

    def __init__(self, run_id: int) -> None:
        super().__init__(NotQueuedBody(run_id=run_id))


class EventNotDead(AdminError):
    status, model, description = 409, NotDeadBody, "the event is pending or handled, not dead"

    def __init__(self, event_id: str) -> None:
        super().__init__(NotDeadBody(event_id=event_id))


def responses(*errors: type[AdminError], **described: str) -> dict[int | str, dict[str, Any]]:
    """A route's OpenAPI ``responses`` for the errors it may raise; ``described`` overrides a
    description by the error class's name (e.g. ``NotFound="no such run"``)."""
    return {
        error.status: {
            "model": error.model,
            "description": described.get(error.__name__, error.description),
        }
        for error in errors
    }


async def _render(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, AdminError)
    return JSONResponse(exc.body.model_dump(by_alias=True), exc.status)


def install(app: FastAPI) -> None:
    """One handler for every admin error."""
    app.add_exception_handler(AdminError, _render)
