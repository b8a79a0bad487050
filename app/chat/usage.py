"""Chat-model usage: one place that counts calls and tokens (metrics, spend scope, log)."""

from __future__ import annotations

import logging

from prometheus_client import Counter

from app.chat.base import Purpose, Usage
from app.kit.spend import record_model_call

log = logging.getLogger("app.chat")

MODEL_CALLS = Counter(
    "model_calls_total", "Chat-model calls by purpose and outcome.", ["purpose", "outcome"]
)
MODEL_TOKENS = Counter(
    "model_tokens_total",
    "Chat-model tokens by purpose and direction (input, output).",
    ["purpose", "direction"],
)

OK = "ok"
EMPTY = "empty"


def record_usage(usage: Usage, *, outcome: str, latency_ms: float) -> None:
    """Record one call that reached the model (tokens were spent even if the text is empty)."""
    purpose = usage.purpose.value
    MODEL_CALLS.labels(purpose=purpose, outcome=outcome).inc()
    MODEL_TOKENS.labels(purpose=purpose, direction="input").inc(usage.input_tokens)
    MODEL_TOKENS.labels(purpose=purpose, direction="output").inc(usage.output_tokens)
    record_model_call(purpose, input_tokens=usage.input_tokens, output_tokens=usage.output_tokens)
    log.info(
        "model call",
        extra={
            "purpose": purpose,
            "outcome": outcome,
            "input_tokens": usage.input_tokens,
            "output_tokens": usage.output_tokens,
            "latency_ms": round(latency_ms, 1),
        },
    )


def record_failure(purpose: Purpose, *, outcome: str, latency_ms: float) -> None:
    """Record a call that produced no response (after the SDK's retries)."""
    MODEL_CALLS.labels(purpose=purpose.value, outcome=outcome).inc()
    record_model_call(purpose.value, input_tokens=0, output_tokens=0)
    log.warning(
        "model call failed",
        extra={"purpose": purpose.value, "outcome": outcome, "latency_ms": round(latency_ms, 1)},
    )
