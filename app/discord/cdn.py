"""Fetch an addressed message's attachments from Discord's CDN: only from allowed hosts, a
redirect followed only when it stays on them, a size cap enforced while reading, one time
limit per attachment. What cannot be fetched is named to the model instead."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from urllib.parse import urljoin

import httpx

from app.discord.attachments import (
    AllowedHosts,
    AttachmentRef,
    Fetched,
    Kind,
    Named,
    Planned,
    Skip,
    image_of,
    plan,
    text_of,
)

log = logging.getLogger(__name__)

FETCH_TIMEOUT_S = 10.0
MAX_REDIRECTS = 3
_REDIRECTS = frozenset({301, 302, 303, 307, 308})


class _TooLarge(Exception):
    pass


class AttachmentFetcher:
    """Reads attachments through ``http`` (never following redirects on its own)."""

    def __init__(
        self,
        http: httpx.AsyncClient,
        hosts: AllowedHosts,
        *,
        timeout_s: float = FETCH_TIMEOUT_S,
        max_redirects: int = MAX_REDIRECTS,
    ) -> None:
        self._http = http
        self._hosts = hosts
        self._timeout_s = timeout_s
        self._max_redirects = max_redirects

    def __repr__(self) -> str:
        return f"AttachmentFetcher(hosts={sorted(self._hosts.entries, key=str)!r})"

    async def fetch_all(self, refs: Sequence[AttachmentRef]) -> list[Fetched]:
        """Every attachment, in order: fetched when the plan allows, named otherwise."""
        planned = plan(refs, self._hosts)
        results = await asyncio.gather(*(self._one(p) for p in planned))
        skipped = [r.skip.name for r in results if isinstance(r, Named)]
        if refs:
            log.info(
                "attachments read",
                extra={"attachments": len(refs), "not_shown": skipped},
            )
        return list(results)

    async def _one(self, planned: Planned) -> Fetched:
        ref = planned.ref
        if planned.kind is Kind.NAMED:
            return Named(ref, planned.skip or Skip.TYPE)
        try:
            async with asyncio.timeout(self._timeout_s):
                data, more = await self._read(ref.url, planned.limit, cut=planned.kind is Kind.TEXT)
        except _TooLarge:
            return Named(ref, Skip.SIZE)
        except _OffTheList:
            return Named(ref, Skip.HOST)
        except (TimeoutError, httpx.HTTPError, httpx.InvalidURL, httpx.StreamError, _Failed) as exc:
            log.warning("attachment not fetched", extra={"error": type(exc).__name__})
            return Named(ref, Skip.FAILED)
        if planned.kind is Kind.IMAGE:
            return image_of(ref, data)
        return text_of(ref, data, truncated=more, limit=planned.limit)

    async def _read(self, url: str, limit: int, *, cut: bool) -> tuple[bytes, bool]:
        """The body (at most ``limit`` bytes) and whether more followed. ``cut``: stop at the
        limit (a text file, shown truncated); otherwise more than the limit is refused."""
        for _ in range(self._max_redirects + 1):
            if not self._hosts.allows(url):
                raise _OffTheList
            async with self._http.stream("GET", url, follow_redirects=False) as response:
                if response.status_code in _REDIRECTS and "location" in response.headers:
                    url = urljoin(url, response.headers["location"])
                    continue
                if response.status_code != 200:
                    raise _Failed(f"status {response.status_code}")
                return await _body(response, limit, cut=cut)
        raise _Failed("too many redirects")


async def _body(response: httpx.Response, limit: int, *, cut: bool) -> tuple[bytes, bool]:
    declared = response.headers.get("content-length", "")
    if not cut and declared.isdigit() and int(declared) > limit:
        raise _TooLarge
    chunks: list[bytes] = []
    size = 0
    async for chunk in response.aiter_bytes():
        chunks.append(chunk)
        size += len(chunk)
        if size > limit:
            if not cut:
                raise _TooLarge
            return b"".join(chunks)[:limit], True
    return b"".join(chunks), False


class _Failed(Exception):
    """The CDN answered something other than the file."""


class _OffTheList(Exception):
    """The URL (or a redirect) leads off DISCORD_ATTACHMENT_HOSTS: never fetched."""
