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
    host, port = text, default_port
    if text.startswith("["):
        host, _, rest = text[1:].partition("]")
        if rest and not rest.startswith(":"):
            raise ValueError(f"{text!r} is not host:port")
        rest = rest[1:]
    else:
        host, _, rest = text.rpartition(":") if text.count(":") == 1 else (text, "", "")
    if rest:
        if not (rest.isascii() and rest.isdigit() and 0 < int(rest) < 65536):
            raise ValueError(f"{text!r} has no valid port")
        port = int(rest)
    if not host:
        raise ValueError(f"{text!r} has no host")
    return host, port
