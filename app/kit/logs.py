"""Structured JSON logs, one event per line, with the turn's ids carried in context."""

from __future__ import annotations

import contextvars
import json
import logging
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

_context: contextvars.ContextVar[dict[str, Any]] = contextvars.ContextVar("log_context", default={})  # noqa: B039

# The context rides on the record under this one attribute, never as top-level attributes:
# `logging` refuses an `extra=` key that is already an attribute of the record, so a call
# passing `extra={"channel_id": …}` inside `log_context(channel_id=…)` would raise.
CONTEXT_ATTR = "log_context"

_RESERVED = set(vars(logging.makeLogRecord({}))) | {CONTEXT_ATTR}


@contextmanager
def log_context(**fields: Any) -> Iterator[None]:
    """Attach fields (event_id, channel_id, turn_id…) to every log line inside the block."""
    token = _context.set({**_context.get(), **fields})
    try:
        yield
    finally:
        _context.reset(token)


_base_factory = logging.getLogRecordFactory()


def _record_with_context(*args: Any, **kwargs: Any) -> logging.LogRecord:
    # The context is taken when the record is made, so it survives queues and handlers
    # that format later (and test capture). The dict is never mutated: log_context makes a
    # new one per block.
    record = _base_factory(*args, **kwargs)
    setattr(record, CONTEXT_ATTR, _context.get())
    return record


logging.setLogRecordFactory(_record_with_context)


def record_fields(record: logging.LogRecord) -> dict[str, Any]:
    """The record's context and `extra` fields, merged; `extra` wins on a shared key."""
    fields = dict(getattr(record, CONTEXT_ATTR, None) or {})
    fields.update({k: v for k, v in vars(record).items() if k not in _RESERVED})
    return fields


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        event: dict[str, Any] = {
            "ts": self.formatTime(record, "%Y-%m-%dT%H:%M:%S"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "event": record.getMessage(),
        }
        event.update(record_fields(record))
        if record.exc_info:
            event["exc"] = self.formatException(record.exc_info)
        return json.dumps(event, default=str, ensure_ascii=False)


def configure_logging(level: str = "INFO") -> None:
    handler = logging.StreamHandler(sys.stdout)
    handler.setFormatter(JsonFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    for noisy in ("httpx", "httpcore", "arq.worker", "uvicorn.access"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
