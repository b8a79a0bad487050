"""Wires the gateway client to delivery: the relay's life from connect to drained shutdown."""

from __future__ import annotations

import asyncio
import logging

import httpx
from pydantic import SecretStr

from app.relay.delivery import Delivery, DeliveryConfig, Sleep
from app.relay.frames import Frame, is_forwarded, to_frame
from app.relay.gateway import Dispatch, GatewayClient, GatewayFatal, GatewayTuning
from app.relay.metrics import RelayMetrics
from app.relay.settings import RelaySettings

log = logging.getLogger(__name__)


async def fetch_gateway_url(http: httpx.AsyncClient, api_base: str, token: SecretStr) -> str:
    """Ask Discord's REST API where the gateway is (GET /gateway/bot)."""
    response = await http.get(
        f"{api_base.rstrip('/')}/gateway/bot",
        headers={"authorization": f"Bot {token.get_secret_value()}"},
    )
    if response.status_code in (401, 403):
        raise GatewayFatal(f"GET /gateway/bot refused the bot token (HTTP {response.status_code})")
    response.raise_for_status()
    url = response.json().get("url")
    if not isinstance(url, str) or not url:
        raise httpx.DecodingError("GET /gateway/bot answered without a url")
    return url


def _tuning(settings: RelaySettings) -> GatewayTuning:
    return GatewayTuning(
        reconnect_base_s=settings.relay_reconnect_base_s,
        reconnect_max_s=settings.relay_reconnect_max_s,
    )


async def run_relay(
    settings: RelaySettings,
    metrics: RelayMetrics,
    stop: asyncio.Event,
    *,
    tuning: GatewayTuning | None = None,
    retry_sleep: Sleep = asyncio.sleep,
) -> list[Frame]:
    """Relay until ``stop`` is set (or the gateway refuses us); return frames left undelivered."""
    webhook_limits = httpx.Limits(max_connections=settings.relay_max_in_flight)
    async with (
        httpx.AsyncClient(timeout=settings.relay_rest_timeout_s) as rest,
        httpx.AsyncClient(timeout=settings.relay_webhook_timeout_s, limits=webhook_limits) as hook,
    ):
        delivery = Delivery(
            hook,
            DeliveryConfig(
                url=settings.webhook_url,
                token=settings.gateway_token,
                capacity=settings.relay_queue_size,
                max_in_flight=settings.relay_max_in_flight,
                retry_base_s=settings.relay_retry_base_s,
                retry_max_s=settings.relay_retry_max_s,
            ),
            metrics,
            sleep=retry_sleep,
        )

        async def locate_gateway() -> str:
            if settings.discord_gateway_url:
                return settings.discord_gateway_url
            return await fetch_gateway_url(
                rest, settings.discord_api_base, settings.discord_bot_token
            )

        async def forward(dispatch: Dispatch) -> None:
            payload = dispatch.payload
            metrics.received.labels(t=str(payload.get("t"))).inc()
            if not is_forwarded(payload):
                return
            frame = to_frame(payload, dispatch.raw, dispatch.session_id)
            try:
                await delivery.submit(frame)
            except asyncio.CancelledError:
                log.warning(
                    "frame not queued at shutdown", extra={"t": frame.t, "event_id": frame.event_id}
                )
                raise

        gateway = GatewayClient(
            token=settings.discord_bot_token,
            gateway_url=locate_gateway,
            on_dispatch=forward,
            metrics=metrics,
            tuning=tuning or _tuning(settings),
        )
        failure = await _run_until_stopped(gateway, stop)
        log.info("relay stopping; draining", extra={"pending": delivery.pending})
        left = await delivery.drain(settings.relay_drain_deadline_s)
        if failure is not None:
            raise failure
        return left


async def _run_until_stopped(gateway: GatewayClient, stop: asyncio.Event) -> BaseException | None:
    """Run the gateway until stop is set; return its failure, if it ended on its own."""
    reader = asyncio.create_task(gateway.run())
    stopped = asyncio.create_task(stop.wait())
    try:
        await asyncio.wait({reader, stopped}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        stopped.cancel()
        reader.cancel()
        outcome = (await asyncio.gather(reader, return_exceptions=True))[0]
    if isinstance(outcome, BaseException) and not isinstance(outcome, asyncio.CancelledError):
        return outcome
    return None
