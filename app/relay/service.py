"""Wires the gateway shards to delivery: the relay's life from connect to drained shutdown.

Shutdown (SIGTERM) goes in order, within RELAY_DRAIN_DEADLINE_S: every shard stops reading
(the frame in hand is queued), every frame read is delivered, and only then are the gateway
sessions closed, with a resumable close code."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Coroutine
from functools import partial
from typing import Any

import httpx
from pydantic import SecretStr

from app.kit.tls import httpx_tls
from app.relay.delivery import Delivery, DeliveryClosed, DeliveryConfig, Sleep
from app.relay.frames import Frame, backoff_delay, is_forwarded, to_frame
from app.relay.gateway import Dispatch, GatewayClient, GatewayFatal, GatewayTuning, OnDispatch
from app.relay.metrics import RelayMetrics
from app.relay.settings import RelaySettings
from app.relay.shards import GatewayBot, IdentifyLimiter, parse_gateway_bot, plan_shards

log = logging.getLogger(__name__)
# After the drain: how long the shards get to close their sessions (a close handshake each).
CLOSE_TIMEOUT_S = 5.0


async def fetch_gateway_bot(http: httpx.AsyncClient, api_base: str, token: SecretStr) -> GatewayBot:
    """Ask Discord's REST API where the gateway is and how to shard (GET /gateway/bot)."""
    response = await http.get(
        f"{api_base.rstrip('/')}/gateway/bot",
        headers={"authorization": f"Bot {token.get_secret_value()}"},
    )
    if response.status_code in (401, 403):
        raise GatewayFatal(f"GET /gateway/bot refused the bot token (HTTP {response.status_code})")
    response.raise_for_status()
    try:
        return parse_gateway_bot(response.json())
    except ValueError as exc:  # also a body that is not JSON
        raise httpx.DecodingError(f"GET /gateway/bot: {exc}") from None


class GatewayDirectory:
    """Where shards open fresh sessions: DISCORD_GATEWAY_URL, or GET /gateway/bot's URL.

    Discord asks clients to cache that URL and ask again only after failing to connect."""

    def __init__(self, settings: RelaySettings, rest: httpx.AsyncClient) -> None:
        self._settings = settings
        self._rest = rest
        self._url = settings.discord_gateway_url

    async def ask(self) -> GatewayBot:
        s = self._settings
        bot = await fetch_gateway_bot(self._rest, s.discord_api_base, s.discord_bot_token)
        self._url = bot.url
        return bot

    async def url(self, stale: bool) -> str:
        if self._settings.discord_gateway_url:
            return self._settings.discord_gateway_url
        if stale or self._url is None:
            return (await self.ask()).url
        return self._url


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
        httpx.AsyncClient(timeout=settings.relay_rest_timeout_s, verify=httpx_tls()) as rest,
        httpx.AsyncClient(
            timeout=settings.relay_webhook_timeout_s, limits=webhook_limits, verify=httpx_tls()
        ) as hook,
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

        async def forward(dispatch: Dispatch) -> None:
            payload = dispatch.payload
            metrics.received.labels(shard=str(dispatch.shard), t=str(payload.get("t"))).inc()
            if not is_forwarded(payload):
                return
            frame = to_frame(payload, dispatch.raw, dispatch.session_id)
            try:
                await delivery.submit(frame)
            except (asyncio.CancelledError, DeliveryClosed) as exc:
                # Still waiting for room (a full queue) when the drain's deadline came.
                metrics.dropped.labels(reason="shutdown").inc()
                log.warning(
                    "frame not queued at shutdown", extra={"t": frame.t, "event_id": frame.event_id}
                )
                if isinstance(exc, asyncio.CancelledError):
                    raise

        clients: list[GatewayClient] = []
        shards = asyncio.create_task(
            _hold_shards(
                settings,
                GatewayDirectory(settings, rest),
                forward,
                metrics,
                tuning or _tuning(settings),
                clients,
            )
        )
        try:
            failure = await _until_stopped(shards, stop)
            deadline = time.monotonic() + settings.relay_drain_deadline_s
            await _stop_reading(clients, within=settings.relay_drain_deadline_s)
            log.info("relay stopping; draining", extra={"pending": delivery.pending})
            left = await delivery.drain(max(0.0, deadline - time.monotonic()))
            for client in clients:
                client.close_sessions()
            if clients:  # none yet: still asking Discord where the gateway is
                await _ended(shards, within=CLOSE_TIMEOUT_S)
        finally:
            shards.cancel()
            await asyncio.gather(shards, return_exceptions=True)
        if failure is not None:
            raise failure
        return left


async def _hold_shards(
    settings: RelaySettings,
    directory: GatewayDirectory,
    forward: OnDispatch,
    metrics: RelayMetrics,
    tuning: GatewayTuning,
    clients: list[GatewayClient],
) -> None:
    """Open one gateway connection per shard this process holds (each added to
    ``clients``); return when they have all ended, raise when one fails."""
    bot = None if settings.discord_gateway_url else await _discover(directory, tuning)
    plan = plan_shards(settings.relay_shard_count, settings.shard_ids, bot)
    log.info(
        "relay holds shards",
        extra={
            "shards": list(plan.ids),
            "shard_count": plan.count,
            "max_concurrency": plan.max_concurrency,
        },
    )
    if bot is not None and bot.shards > plan.count:
        log.warning("Discord recommends more shards", extra={"recommended": bot.shards})
    if bot is not None and bot.remaining is not None and bot.remaining < len(plan.ids):
        # At the daily limit Discord ends every session of the bot and resets its token.
        log.error("too few session starts left today", extra={"remaining": bot.remaining})
    limiter = IdentifyLimiter(plan.max_concurrency, tuning.identify_interval_s)
    clients += [
        GatewayClient(
            token=settings.discord_bot_token,
            gateway_url=directory.url,
            on_dispatch=forward,
            metrics=metrics,
            shard=(shard_id, plan.count),
            identify_turn=partial(limiter.wait_turn, shard_id),
            tuning=tuning,
        )
        for shard_id in plan.ids
    ]
    await _first_failure([client.run() for client in clients])


async def _discover(directory: GatewayDirectory, tuning: GatewayTuning) -> GatewayBot:
    """GET /gateway/bot, retried with backoff while Discord cannot answer."""
    failures = 0
    while True:
        try:
            return await directory.ask()
        except httpx.HTTPError as exc:
            delay = backoff_delay(failures, tuning.reconnect_base_s, tuning.reconnect_max_s)
            log.warning(
                "GET /gateway/bot failed; retrying",
                extra={"error": type(exc).__name__, "delay_s": round(delay, 3)},
            )
            failures += 1
            await asyncio.sleep(delay)


async def _first_failure(runs: list[Coroutine[Any, Any, None]]) -> None:
    """Run the shards together until one fails (re-raised); cancel the others then."""
    tasks = [asyncio.create_task(run) for run in runs]
    try:
        done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_EXCEPTION)
        for task in done:
            task.result()
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


async def _until_stopped(shards: asyncio.Task[None], stop: asyncio.Event) -> BaseException | None:
    """Wait until ``stop`` is set, or the shards end on their own (their failure)."""
    stopped = asyncio.create_task(stop.wait())
    try:
        await asyncio.wait({shards, stopped}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        stopped.cancel()
    if shards.done() and not shards.cancelled():
        return shards.exception()
    return None


async def _stop_reading(clients: list[GatewayClient], *, within: float) -> None:
    """Every shard stops reading the gateway; each frame in hand is queued for delivery (a
    shard still waiting for room when ``within`` runs out stays waiting, and drain refuses it)."""
    stopping = [asyncio.create_task(client.stop_reading()) for client in clients]
    if stopping:
        await asyncio.wait(stopping, timeout=within)
    for task in stopping:
        task.cancel()


async def _ended(shards: asyncio.Task[None], *, within: float) -> None:
    """Give the shards ``within`` seconds to close their sessions; the caller cancels the rest."""
    await asyncio.wait({shards}, timeout=within)
