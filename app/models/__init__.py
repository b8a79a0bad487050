"""SQLAlchemy tables, one module per aggregate; importing this package registers them all.

Only ``Base`` is exported: each table is used through its one owner module (see the
import-linter contracts in pyproject.toml), never imported from here."""

from app.models import (
    agent,
    channels,
    consent,
    erasure,
    inbox,
    memory,
    messages,
    nightly,
    signals,
    structured,
    usage,
)
from app.models.base import Base

__all__ = [
    "Base",
    "agent",
    "channels",
    "consent",
    "erasure",
    "inbox",
    "memory",
    "messages",
    "nightly",
    "signals",
    "structured",
    "usage",
]
