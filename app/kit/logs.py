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

_RESERVED = set(vars(logging.makeLogRecord({})))


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
    # The context is copied when the record is made, so it survives queues and handlers
    # that format later (and test capture).
    record = _base_factory(*args, **kwargs)
    for key, value in _context.get().items():
        record.__dict__.setdefault(key, value)
    return record


logging.setLogRecordFactory(_record_with_context)


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        event: dict[str, Any] = {
            "ts": self.formatTime(record, "%Y-%m-%dT%H:%M:%S"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "event": record.getMessage(),
        }
        event.update({k: v for k, v in vars(record).items() if k not in _RESERVED})
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
