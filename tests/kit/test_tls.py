"""Every HTTP client of a process shares one TLS context, and sharing it verifies as each
library's own default would: certificates checked against a trust store (an operator's
SSL_CERT_FILE when set), host names checked."""

from __future__ import annotations

import ssl
from collections.abc import Callable
from pathlib import Path

import certifi
import httpx
import pytest

from app.chat.anthropic import anthropic_client
from app.chat.openai import openai_client
from app.kit.tls import httpx2_tls, httpx_tls

BEGIN, END = "-----BEGIN CERTIFICATE-----", "-----END CERTIFICATE-----"


@pytest.mark.parametrize("context", [httpx_tls, httpx2_tls])
def test_the_shared_context_verifies_certificates_and_host_names(
    context: Callable[[], ssl.SSLContext],
) -> None:
    shared = context()
    assert shared is context()  # built once
    assert shared.verify_mode is ssl.CERT_REQUIRED and shared.check_hostname
    assert shared.cert_store_stats()["x509_ca"] > 0  # a trust store is loaded


async def test_the_model_sdks_clients_use_the_shared_context() -> None:
    for sdk in (anthropic_client(None, timeout_s=1.0), openai_client(None, timeout_s=1.0)):
        try:
            # httpx2's transport keeps the context its connections are made with.
            assert sdk._client._transport._pool._ssl_context is httpx2_tls()  # type: ignore[attr-defined]
        finally:
            await sdk.close()


async def test_a_client_on_the_shared_context_keeps_it() -> None:
    async with httpx.AsyncClient(verify=httpx_tls()) as client:
        assert client._transport._pool._ssl_context is httpx_tls()  # type: ignore[attr-defined]


@pytest.mark.parametrize("context", [httpx_tls, httpx2_tls])
def test_an_operators_ssl_cert_file_is_the_trust_store(
    context: Callable[[], ssl.SSLContext],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    """Behind a proxy with its own CA, SSL_CERT_FILE names the one store to trust."""
    bundle = Path(certifi.where()).read_text()
    first = bundle[bundle.index(BEGIN) : bundle.index(END) + len(END)] + "\n"
    only = tmp_path / "ca.pem"
    only.write_text(first)
    monkeypatch.setenv("SSL_CERT_FILE", str(only))
    context.cache_clear()  # type: ignore[attr-defined]
    try:
        assert context().cert_store_stats()["x509_ca"] == 1
    finally:
        context.cache_clear()  # type: ignore[attr-defined]
