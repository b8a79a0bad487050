"""Which URLs read_page may fetch: http(s) to public addresses only (no SSRF into our network)."""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from collections.abc import Awaitable, Callable
from urllib.parse import urlsplit

Resolver = Callable[[str], Awaitable[list[str]]]

METADATA_HOSTS = frozenset({"metadata.google.internal", "metadata", "instance-data"})
METADATA_ADDRESSES = frozenset(
    {
        ipaddress.ip_address("169.254.169.254"),
        ipaddress.ip_address("fd00:ec2::254"),
        ipaddress.ip_address("100.100.100.200"),
    }
)


class RefusedURL(Exception):
    """The URL may not be fetched; the message is safe to show the model."""


async def system_resolver(host: str) -> list[str]:
    infos = await asyncio.get_running_loop().getaddrinfo(host, None, type=socket.SOCK_STREAM)
    return [str(info[4][0]) for info in infos]


def forbidden_address(address: str) -> bool:
    """True for loopback, private, link-local, unspecified, multicast, reserved, metadata."""
    ip = ipaddress.ip_address(address.split("%", 1)[0])  # drop an IPv6 zone id
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return (
        ip in METADATA_ADDRESSES
        or ip.is_loopback
        or ip.is_private
        or ip.is_link_local
        or ip.is_unspecified
        or ip.is_multicast
        or ip.is_reserved
        or not ip.is_global
    )


def parse_host(url: str) -> str:
    """The host of an http(s) URL, or RefusedURL for anything else."""
    parts = urlsplit(url.strip())
    if parts.scheme.lower() not in ("http", "https"):
        raise RefusedURL("only http and https URLs can be read")
    host = (parts.hostname or "").rstrip(".").lower()
    if not host:
        raise RefusedURL("the URL has no host")
    if host in METADATA_HOSTS or host == "localhost" or host.endswith(".localhost"):
        raise RefusedURL("that host is not reachable from here")
    return host


async def check_url(url: str, resolve: Resolver = system_resolver) -> None:
    """Raise RefusedURL unless every address the host resolves to is public."""
    host = parse_host(url)
    try:
        addresses = [host] if _is_ip(host) else await resolve(host)
    except OSError:
        raise RefusedURL("the host does not resolve") from None
    if not addresses:
        raise RefusedURL("the host does not resolve")
    if any(forbidden_address(address) for address in addresses):
        raise RefusedURL("that host points at a private or internal address")


def _is_ip(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True
