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
ESTIMATED_CALLS = Counter(
    "model_calls_estimated_total",
    "Chat-model calls whose server reported no usage: their tokens are our estimate.",
    ["purpose"],
)


def record_usage(usage: Usage, *, outcome: str, latency_ms: float) -> None:
    """Record one call that reached the model (tokens were spent even if the text is empty)."""
    purpose = usage.purpose.value
    MODEL_CALLS.labels(purpose=purpose, outcome=outcome).inc()
    MODEL_TOKENS.labels(purpose=purpose, direction="input").inc(usage.input_tokens)
    MODEL_TOKENS.labels(purpose=purpose, direction="output").inc(usage.output_tokens)
    if usage.estimated:
        ESTIMATED_CALLS.labels(purpose=purpose).inc()
    record_model_call(
        purpose,
        input_tokens=usage.input_tokens,
        output_tokens=usage.output_tokens,
        estimated=usage.estimated,
    )
    log.info(
        "model call",
        extra={
            "purpose": purpose,
            "outcome": outcome,
            "input_tokens": usage.input_tokens,
            "output_tokens": usage.output_tokens,
            "estimated": usage.estimated,
            "latency_ms": round(latency_ms, 1),
        },
    )


def record_failure(purpose: Purpose, *, outcome: str, latency_ms: float) -> None:
    """Record a call that produced no response (after the SDK's retries), or was refused
    before it was made (``over_budget``)."""
    MODEL_CALLS.labels(purpose=purpose.value, outcome=outcome).inc()
    record_model_call(purpose.value, input_tokens=0, output_tokens=0)
    log.warning(
        "model call failed",
        extra={"purpose": purpose.value, "outcome": outcome, "latency_ms": round(latency_ms, 1)},
    )


def record_refusal(purpose: Purpose) -> None:
    """A call not made: the payer's budget was spent (no tokens, and not a model call)."""
    MODEL_CALLS.labels(purpose=purpose.value, outcome="over_budget").inc()
    log.info("model call refused: daily token budget spent", extra={"purpose": purpose.value})
