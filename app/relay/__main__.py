"""`python -m app.relay`: run the gateway relay until SIGTERM, then drain and exit."""

from __future__ import annotations

import asyncio
import logging
import signal
import sys

from prometheus_client import start_http_server

from app.kit.logs import configure_logging
from app.kit.loop import run_main
from app.relay.gateway import GatewayFatal
from app.relay.metrics import RelayMetrics
from app.relay.service import run_relay
from app.relay.settings import RelaySettings, RelaySettingsError, load_relay_settings

log = logging.getLogger("app.relay")


async def _serve(settings: RelaySettings, metrics: RelayMetrics) -> int:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    try:
        left = await run_relay(settings, metrics, stop)
    except GatewayFatal as exc:
        log.error("relay stopped: %s", exc)
        return 1
    log.info("relay stopped", extra={"undelivered": len(left)})
    return 0


def main() -> int:
    try:
        settings = load_relay_settings()
    except RelaySettingsError as exc:
        print(str(exc), file=sys.stderr)
        return 2
    configure_logging(settings.log_level)
    metrics = RelayMetrics()
    if settings.relay_metrics_port:
        start_http_server(settings.relay_metrics_port, registry=metrics.registry)
    return run_main(_serve(settings, metrics))


if __name__ == "__main__":
    sys.exit(main())
