"""What holding every request against Discord's API description costs the fake Discord.

    python -m bench.described [--requests 2000] [--runs 3]

The real client posts replies (a 2,000-character message with a nonce and a reference), a
deferral and an ephemeral edit to the fake served on a local port, with the description check
on, then with it replaced by one that finds nothing, in the same run; it prints the time per
request of each and their ratio (the check's share of a fake call, not of a bot's turn)."""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from unittest import mock

import httpx

from app.discord.client import DiscordClient, InteractionWebhook
from app.discord.described import Description
from app.discord.fake import FakeDiscord
from tests.support.servers import serve


async def _calls(client: DiscordClient, fake: FakeDiscord, n: int) -> float:
    fake.interactions.commands[None] = [{"id": "1", "name": "memory", "options": []}]
    started = time.perf_counter()
    for i in range(n // 3):
        await client.send_message(5, "x" * 2000, nonce_key=f"bench:{i}", reply_to=10**17 + i)
        d = fake.interactions.use("/memory", user_id=7, channel_id=5)
        await client.respond(int(d["id"]), d["token"], {"type": 5, "data": {"flags": 64}})
        to = InteractionWebhook(fake.bot_user_id, int(d["id"]), d["token"])
        await client.edit_original(to, "Paused: I won't learn anything new about you.")
    return (time.perf_counter() - started) / (n // 3 * 3)


async def _run(requests: int, runs: int) -> None:
    fake = FakeDiscord(token="bench")
    checked, unchecked = [], []
    async with serve(fake.app) as url, httpx.AsyncClient() as http:
        client = DiscordClient(http, token="bench", api_base=url)
        await _calls(client, fake, 30)  # warm: validators built, connections open
        for _ in range(runs):
            checked.append(await _calls(client, fake, requests))
            with mock.patch.object(Description, "check", return_value=None):
                unchecked.append(await _calls(client, fake, requests))
    with_check, without = statistics.median(checked), statistics.median(unchecked)
    print(f"per fake request: {with_check * 1e3:.2f} ms checked, {without * 1e3:.2f} ms not")
    print(f"ratio checked / not: {with_check / without:.2f} (median of {runs} runs)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    asyncio.run(_run(args.requests, args.runs))


if __name__ == "__main__":
    main()
