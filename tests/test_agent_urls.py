"""Which URLs read_page may fetch (pure checks with an injected resolver)."""

from __future__ import annotations

import pytest

from app.agent.urls import RefusedURL, check_url, forbidden_address

HOSTS = {
    "example.com": ["93.184.216.34", "2606:2800:220:1:248:1893:25c8:1946"],
    "sneaky.test": ["93.184.216.34", "192.168.1.20"],
    "rebind.test": ["::ffff:127.0.0.1"],
}


async def resolver(host: str) -> list[str]:
    if host not in HOSTS:
        raise OSError("no such host")
    return HOSTS[host]


@pytest.mark.parametrize(
    "address",
    [
        "127.0.0.1",
        "10.1.2.3",
        "172.16.0.1",
        "192.168.0.1",
        "169.254.169.254",
        "0.0.0.0",
        "224.0.0.1",
        "240.0.0.1",
        "100.100.100.200",
        "::1",
        "fe80::1",
        "fd00:ec2::254",
        "::ffff:10.0.0.1",
    ],
)
def test_internal_addresses_are_forbidden(address: str) -> None:
    assert forbidden_address(address)


@pytest.mark.parametrize("address", ["93.184.216.34", "2606:2800:220:1:248:1893:25c8:1946"])
def test_public_addresses_are_allowed(address: str) -> None:
    assert not forbidden_address(address)


@pytest.mark.parametrize(
    "url", ["https://example.com/a?b=c", "http://EXAMPLE.com./", "https://93.184.216.34/"]
)
async def test_public_http_urls_pass(url: str) -> None:
    await check_url(url, resolver)


@pytest.mark.parametrize(
    "url",
    [
        "file:///etc/passwd",
        "ftp://example.com/",
        "javascript:alert(1)",
        "http:///nohost",
        "http://localhost:8000/",
        "http://metadata.google.internal/",
        "http://169.254.169.254/latest/meta-data/",
        "http://[fd00:ec2::254]/",
        "http://sneaky.test/",  # one private address among public ones is enough to refuse
        "http://rebind.test/",
        "http://unknown.test/",  # does not resolve
    ],
)
async def test_other_urls_are_refused(url: str) -> None:
    with pytest.raises(RefusedURL):
        await check_url(url, resolver)
