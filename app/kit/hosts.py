"""Host allow-list entries (``host`` or ``host:port``), as settings name them (pure)."""

from __future__ import annotations

from urllib.parse import urlsplit


def parse_host(entry: str) -> tuple[str, int | None]:
    """``cdn.example.com`` → (host, None); ``127.0.0.1:8443`` / ``[::1]:8443`` → (host, port).
    ValueError for anything else (a scheme, a path, credentials, a bad port)."""
    text = entry.strip().lower()
    if not text or any(c in text for c in "/@?#\\ ") or text.startswith(("http:", "https:")):
        raise ValueError(f"{entry!r} is not a host or host:port")
    parts = urlsplit(f"//{text}")
    try:
        port = parts.port
    except ValueError:
        raise ValueError(f"{entry!r} has an invalid port") from None
    if not parts.hostname:
        raise ValueError(f"{entry!r} is not a host or host:port")
    return parts.hostname, port
