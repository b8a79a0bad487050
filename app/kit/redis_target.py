"""Where the job queue lives: one Redis URL, or a master that Redis Sentinel names.

Plain data, no client: the API's queue and the worker build their connections from it
(``app.kit.arqueue.redis_client``)."""

from __future__ import annotations

from dataclasses import dataclass, field

SENTINEL_PORT = 26379


@dataclass(frozen=True, slots=True)
class RedisTarget:
    """``url`` alone, or, with ``sentinels``, the master named ``sentinel_master``; the URL then
    gives only the master's password, user, database number and TLS (``rediss://``)."""

    url: str
    sentinels: tuple[tuple[str, int], ...] = ()
    sentinel_master: str = "mymaster"
    sentinel_password: str | None = field(default=None, repr=False)


def parse_address(text: str, *, default_port: int) -> tuple[str, int]:
    """``host``, ``host:port`` or ``[v6 address]:port``; ValueError says what is wrong."""
    text = text.strip()
    if text.startswith("["):
        host, _, rest = text[1:].partition("]")
        if rest and not rest.startswith(":"):
            raise ValueError(f"{text!r} is not host:port")
        port_text = rest[1:] if rest else None
    elif text.count(":") == 1:
        host, _, port_text = text.partition(":")
    else:  # no port, or a bare IPv6 address
        host, port_text = text, None
    if not host:
        raise ValueError(f"{text!r} has no host")
    if port_text is None:
        return host, default_port
    if not (port_text.isascii() and port_text.isdigit() and 0 < int(port_text) < 65536):
        raise ValueError(f"{text!r} has no valid port")
    return host, int(port_text)
