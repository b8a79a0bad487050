"""Which URLs read_page may fetch: http(s) to public addresses only (no SSRF into our network).

IPv6 forms that carry an IPv4 address: IPv4-mapped and well-known NAT64 are judged by the IPv4
address they carry (DNS64 hosts resolve every IPv4-only site to NAT64); 6to4, Teredo,
local-use NAT64 and IPv4-compatible are refused whole (deprecated tunnels or site-defined
prefixes, where the address a packet reaches is not the one written)."""

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

NAT64 = ipaddress.ip_network("64:ff9b::/96")
REFUSED_IPV6 = (
    ipaddress.ip_network("2002::/16"),  # 6to4
    ipaddress.ip_network("2001::/32"),  # Teredo
    ipaddress.ip_network("64:ff9b:1::/48"),  # local-use NAT64 (RFC 8215)
    ipaddress.ip_network("::/96"),  # IPv4-compatible (deprecated), with :: and ::1
)


class RefusedURL(Exception):
    """The URL may not be fetched; the message is safe to show the model."""


async def system_resolver(host: str) -> list[str]:
    infos = await asyncio.get_running_loop().getaddrinfo(host, None, type=socket.SOCK_STREAM)
    return [str(info[4][0]) for info in infos]


def embedded_ipv4(ip: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    """The IPv4 address packets to ``ip`` reach: IPv4-mapped and well-known NAT64 forms."""
    if ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    if ip in NAT64:
        return ipaddress.IPv4Address(int(ip) & 0xFFFF_FFFF)
    return None


def forbidden_address(address: str) -> bool:
    """True for loopback, private, link-local, unspecified, multicast, reserved, metadata,
    the refused IPv6 transition ranges, and IPv6 forms carrying a forbidden IPv4 address."""
    ip: ipaddress.IPv4Address | ipaddress.IPv6Address
    ip = ipaddress.ip_address(address.split("%", 1)[0])  # drop an IPv6 zone id
    if isinstance(ip, ipaddress.IPv6Address):
        if any(ip in network for network in REFUSED_IPV6):
            return True
        ip = embedded_ipv4(ip) or ip
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
    """The host of an http(s) URL, or RefusedURL for anything else.

    Backslashes, whitespace, control characters and user info are refused: URL parsers
    disagree about them (``http://127.0.0.1\\@example.com/`` is example.com to Python and
    127.0.0.1 to a browser-style parser), and the reader parses the URL again."""
    url = url.strip()
    if "\\" in url:
        raise RefusedURL("URLs with a backslash are not read")
    if any(ch.isspace() or ord(ch) < 0x20 or ord(ch) == 0x7F for ch in url):
        raise RefusedURL("URLs with spaces or control characters are not read")
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018  # a bad port raises here, not later in the reader
    except ValueError:
        raise RefusedURL("the URL is malformed") from None
    if parts.scheme.lower() not in ("http", "https"):
        raise RefusedURL("only http and https URLs can be read")
    if "@" in parts.netloc:
        raise RefusedURL("URLs with a user name or password are not read")
    host = (parts.hostname or "").rstrip(".").lower()
    if not host:
        raise RefusedURL("the URL has no host")
    # Percent-escapes and other marks in a name are decoded differently by other parsers.
    if not _is_ip(host) and not all(ch.isalnum() or ch in "-._" for ch in host):
        raise RefusedURL("the host name has characters that are not allowed")
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
