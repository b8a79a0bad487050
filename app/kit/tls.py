"""One TLS context per process, shared by every HTTP client it opens.

An httpx client builds its own SSL context unless given one, and loading the trust store into
a context costs ~20 ms of CPU and its memory each time: a worker opens several clients (Discord
and embeddings, each chat SDK), the relay two, the decision service one. A context is safe to
share: each connection takes its own session from it. Each library keeps its own default trust
store (httpx: certifi; httpx2, the SDKs' client: the system's), and both honour
``SSL_CERT_FILE``/``SSL_CERT_DIR`` as they would unshared. The worker's aiohttp session for
Jev takes httpx's context, so Jev is trusted as it was when httpx called it."""

from __future__ import annotations

import ssl
from functools import cache

import httpx


@cache
def httpx_tls() -> ssl.SSLContext:
    """``httpx``'s default context, built once."""
    return httpx.create_ssl_context()


@cache
def httpx2_tls() -> ssl.SSLContext:
    """``httpx2``'s default context (the model SDKs' client), built once."""
    import httpx2  # only where a model SDK is used: the API never loads it

    return httpx2.create_ssl_context()
