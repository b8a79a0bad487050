"""The admin bearer check: ADMIN_SECRET, constant-time, 503 while it is unset.

The check runs twice on purpose: an ASGI gate answers before FastAPI reads (and parses) the
request body, so a caller without the secret gets 401, never a 400/422 about a body it had no
right to send; the route dependency declares the scheme in OpenAPI and guards the handler."""

from __future__ import annotations

import hmac
from typing import Annotated

from fastapi import Depends, HTTPException, Request, Security, status
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from app.admin.deps import get_app_settings
from app.config import Settings

ADMIN_PATHS = (
    "/memory/rollback",
    "/nightly/",
    "/users/",
    "/memories/",
    "/inbox/",
    "/channels/",
)
DISABLED = "admin API disabled: ADMIN_SECRET is not set"
UNAUTHORIZED = "missing or wrong admin bearer token"

# auto_error off: a missing header must be our 401 (and the 503 check must come first).
admin_bearer = HTTPBearer(
    auto_error=False, scheme_name="AdminBearer", description="Authorization: Bearer ADMIN_SECRET"
)


def refusal(settings: Settings, token: str | None) -> tuple[int, str] | None:
    """Why this bearer token may not use the admin API, or None when it may."""
    secret = settings.admin_secret.get_secret_value() if settings.admin_secret else ""
    if not secret:
        return status.HTTP_503_SERVICE_UNAVAILABLE, DISABLED
    if not hmac.compare_digest((token or "").encode(), secret.encode()):
        return status.HTTP_401_UNAUTHORIZED, UNAUTHORIZED
    return None


def _bearer_token(header: str) -> str | None:
    scheme, _, token = header.partition(" ")
    return token.strip() if scheme.lower() == "bearer" else None


def require_admin(
    request: Request,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Security(admin_bearer)],
    settings: Annotated[Settings, Depends(get_app_settings)],
) -> None:
    refused = refusal(settings, credentials.credentials if credentials is not None else None)
    if refused is not None:
        code, detail = refused
        headers = {"WWW-Authenticate": "Bearer"} if code == status.HTTP_401_UNAUTHORIZED else None
        raise HTTPException(code, detail, headers=headers)
    # Every admin parameter is one value: a repeated one (`?before=x&before=5`) is refused,
    # never read as its last value while the others go unchecked.
    keys = [key for key, _ in request.query_params.multi_items()]
    if repeated := sorted({key for key in keys if keys.count(key) > 1}):
        given_twice = "given more than once"
        raise HTTPException(
            422,
            [
                {"loc": ["query", key], "msg": given_twice, "type": "value_error"}
                for key in repeated
            ],
        )


class AdminGate:
    """Refuse admin requests without the secret before anything reads their body."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["path"].startswith(ADMIN_PATHS):
            headers = dict(scope["headers"])
            token = _bearer_token(headers.get(b"authorization", b"").decode("latin-1"))
            refused = refusal(scope["app"].state.settings, token)
            if refused is not None:
                code, detail = refused
                extra = {"WWW-Authenticate": "Bearer"} if code == 401 else None
                await JSONResponse({"detail": detail}, code, headers=extra)(scope, receive, send)
                return
        await self.app(scope, receive, send)
