"""The admin bearer check: ADMIN_SECRET, constant-time, 503 while it is unset."""

from __future__ import annotations

import hmac
from typing import Annotated

from fastapi import Depends, HTTPException, Security, status
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from app.config import Settings
from app.web import get_app_settings

# auto_error off: a missing header must be our 401 (and the 503 check must come first).
admin_bearer = HTTPBearer(
    auto_error=False, scheme_name="AdminBearer", description="Authorization: Bearer ADMIN_SECRET"
)


def require_admin(
    credentials: Annotated[HTTPAuthorizationCredentials | None, Security(admin_bearer)],
    settings: Annotated[Settings, Depends(get_app_settings)],
) -> None:
    secret = settings.admin_secret.get_secret_value() if settings.admin_secret else ""
    if not secret:
        raise HTTPException(
            status.HTTP_503_SERVICE_UNAVAILABLE, "admin API disabled: ADMIN_SECRET is not set"
        )
    given = credentials.credentials if credentials is not None else ""
    if not hmac.compare_digest(given.encode(), secret.encode()):
        raise HTTPException(
            status.HTTP_401_UNAUTHORIZED,
            "missing or wrong admin bearer token",
            headers={"WWW-Authenticate": "Bearer"},
        )
