"""Prometheus metrics of the relay, on a registry of its own so tests can read fresh counts."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge


class RelayMetrics:
    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry if registry is not None else CollectorRegistry()
        self.received = Counter(
            "relay_frames_received",
            "Dispatch frames received from the gateway, by shard and type.",
            ["shard", "t"],
            registry=self.registry,
        )
        self.forwarded = Counter(
            "relay_frames_forwarded",
            "Frames the webhook acknowledged with a 2xx.",
            registry=self.registry,
        )
        self.retried = Counter(
            "relay_delivery_retries",
            "Webhook delivery attempts that will be retried, by reason.",
            ["reason"],
            registry=self.registry,
        )
        self.dropped = Counter(
            "relay_frames_dropped",
            "Frames given up on, by reason (413/422 from the webhook, shutdown, error).",
            ["reason"],
            registry=self.registry,
        )
        self.refused = Counter(
            "relay_webhook_refused",
            "Webhook answers that refuse the relay itself (401, 403, 404, ...); retried. Alert.",
            ["status"],
            registry=self.registry,
        )
        self.queue_depth = Gauge(
            "relay_queue_depth",
            "Frames queued or in flight to the webhook.",
            registry=self.registry,
        )
        self.reconnects = Counter(
            "relay_gateway_reconnects",
            "Gateway connections a shard opened after its first one.",
            ["shard"],
            registry=self.registry,
        )
        self.identifies = Counter(
            "relay_gateway_identifies",
            "IDENTIFYs (new sessions, limited per day by Discord) sent, by shard.",
            ["shard"],
            registry=self.registry,
        )

    def value(self, name: str, **labels: str) -> float:
        """A sample's current value (0 when never set); for tests and debugging."""
        found = self.registry.get_sample_value(name, labels)
        return found if found is not None else 0.0

    def total(self, name: str) -> float:
        """The sum of a sample over all its label values; for tests and debugging."""
        return sum(
            sample.value
            for family in self.registry.collect()
            for sample in family.samples
            if sample.name == name
        )
