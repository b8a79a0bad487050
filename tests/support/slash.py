"""Slash commands end to end: the whole bot (tests/support/stack.py) with the real relay on a
fake gateway in front of it and the real worker running, so a person's use of a command
travels as in production — gateway, relay, /webhook, inbox, the deferral job and the
event's job — and its answers land on the fake Discord, held to Discord's rules."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import httpx

from app.commands.register import register_commands
from app.discord.client import DiscordClient
from app.discord.fake import FakeDiscord
from app.discord.fake_interactions import Interacting
from app.kit.tls import httpx_tls
from app.relay.metrics import RelayMetrics
from app.relay.service import run_relay
from app.worker import build_worker
from tests.support.frames import frame
from tests.support.relay_fakes import FAST, FakeGateway, fake_gateway, relay_settings
from tests.support.stack import TOKEN, Stack
from tests.support.waiting import wait_until

GUILD, CHANNEL = 4_100_000_000_000_000_001, 4_100_000_000_000_000_011


@dataclass
class Slash:
    stack: Stack
    gateway: FakeGateway
    sent: dict[int, dict[str, Any]] = field(default_factory=dict)  # each interaction's d

    @property
    def discord(self) -> FakeDiscord:
        return self.stack.discord

    async def use(
        self,
        command: str,
        values: dict[str, Any] | None = None,
        *,
        user: int,
        guild: int | None = GUILD,
        channel: int = CHANNEL,
        roles: Sequence[int] = (),
        focused: str | None = None,
    ) -> Interacting:
        """A person uses ``command`` in Discord: the gateway sends its INTERACTION_CREATE."""
        d = self.discord.interactions.use(
            command,
            values,
            user_id=user,
            channel_id=channel,
            guild_id=guild,
            roles=roles,
            focused=focused,
        )
        await self.gateway.route(frame("INTERACTION_CREATE", d))
        used = self.discord.interactions.find(d["id"])
        self.sent[used.id] = d
        return used

    async def answer_of(self, used: Interacting, *, within: float = 20) -> list[dict[str, Any]]:
        """The ephemeral answer once its original response holds more than "thinking…"."""
        await wait_until(
            lambda: used.original is not None and not used.original["loading"],
            within=within,
            what="the slash command's answer",
        )
        return used.messages

    async def choices_of(self, used: Interacting, *, within: float = 20) -> list[dict[str, Any]]:
        await wait_until(
            lambda: used.choices is not None, within=within, what="autocomplete choices"
        )
        assert used.choices is not None
        return used.choices


async def register(stack: Stack, *, guild_id: int | None = None) -> list[str]:
    """``python -m app register-commands`` as the operator runs it (its body)."""
    async with httpx.AsyncClient(verify=httpx_tls()) as http:
        discord = DiscordClient(
            http, token=stack.discord.token, api_base=stack.settings.discord_api_base
        )
        return (await register_commands(discord, guild_id=guild_id)).names


@asynccontextmanager
async def slash_world(stack: Stack) -> AsyncIterator[Slash]:
    """The relay on a fake gateway, forwarding to the stack's webhook, and a running worker;
    the commands registered."""
    await register(stack)
    worker = build_worker(stack.settings, cron_jobs=[])
    working = asyncio.create_task(worker.async_run())
    stop = asyncio.Event()
    async with fake_gateway(automatic=True) as gateway:
        settings = relay_settings(
            stack.api,
            gateway_token=TOKEN["x-discord-gateway-token"],
            discord_gateway_url=gateway.url,
            relay_shard_count=1,
        )
        relay = asyncio.create_task(run_relay(settings, RelayMetrics(), stop, tuning=FAST))
        try:
            await gateway.until_live({0})
            await wait_until(lambda: "services" in worker.ctx, within=20, what="the worker")
            yield Slash(stack, gateway)
        finally:
            stop.set()
            await asyncio.wait_for(relay, 10)
            worker.drain()
            await asyncio.gather(working, return_exceptions=True)
            await worker.close()
