"""Which URLs read_page may fetch (pure checks with an injected resolver)."""

from __future__ import annotations

import ipaddress

import pytest

from app.agent.urls import RefusedURL, check_url, embedded_ipv4, forbidden_address

HOSTS = {
    "example.com": ["93.184.216.34", "2606:2800:220:1:248:1893:25c8:1946"],
    "sneaky.test": ["93.184.216.34", "192.168.1.20"],
    "rebind.test": ["::ffff:127.0.0.1"],
    "sixtofour.test": ["2002:5db8:d822::1"],  # 6to4 of a public address: the range is refused
    "teredo.test": ["2001:0:4136:e378:8000:63bf:3fff:fdd2"],
    "nat64-internal.test": ["64:ff9b::a9fe:a9fe"],  # NAT64 of 169.254.169.254
    "nat64-public.test": ["64:ff9b::5db8:d822"],  # NAT64 of 93.184.216.34 (a DNS64 host)
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
        # 6to4 (2002::/16) is refused whole, whatever IPv4 address it carries.
        "2002:7f00:1::",
        "2002:a9fe:a9fe::1",
        "2002:5db8:d822::1",
        # Teredo (2001::/32) is refused whole.
        "2001:0:4136:e378:8000:63bf:3fff:fdd2",
        "2001::1",
        # Well-known NAT64 is judged by the IPv4 address it carries.
        "64:ff9b::7f00:1",  # 127.0.0.1
        "64:ff9b::a9fe:a9fe",  # 169.254.169.254
        "64:ff9b::a00:1",  # 10.0.0.1
        "64:ff9b::6464:64c8",  # 100.100.100.200
        # Local-use NAT64 (64:ff9b:1::/48) and IPv4-compatible (::/96) are refused whole.
        "64:ff9b:1::5db8:d822",
        "::93.184.216.34",
        "::127.0.0.1",
        "::ffff:169.254.169.254",
    ],
)
def test_internal_addresses_are_forbidden(address: str) -> None:
    assert forbidden_address(address)


@pytest.mark.parametrize(
    "address",
    [
        "93.184.216.34",
        "2606:2800:220:1:248:1893:25c8:1946",
        "::ffff:93.184.216.34",
        "64:ff9b::5db8:d822",  # NAT64 of a public address: how a DNS64 host sees IPv4 sites
    ],
)
def test_public_addresses_are_allowed(address: str) -> None:
    assert not forbidden_address(address)


@pytest.mark.parametrize(
    ("address", "embedded"),
    [
        ("::ffff:10.0.0.1", "10.0.0.1"),
        ("64:ff9b::a9fe:a9fe", "169.254.169.254"),
        ("64:ff9b::5db8:d822", "93.184.216.34"),
        ("2002:7f00:1::", None),  # 6to4 is refused whole, not decoded
        ("2001:0:4136:e378:8000:63bf:3fff:fdd2", None),  # Teredo likewise
        ("2606:2800:220:1:248:1893:25c8:1946", None),
    ],
)
def test_embedded_ipv4_is_decoded_for_mapped_and_nat64_only(
    address: str, embedded: str | None
) -> None:
    found = embedded_ipv4(ipaddress.IPv6Address(address))
    assert (str(found) if found else None) == embedded


@pytest.mark.parametrize(
    "url",
    [
        "https://example.com/a?b=c",
        "http://EXAMPLE.com./",
        "https://93.184.216.34/",
        "https://example.com/@someone",  # an @ in the path is not user info
        "http://nat64-public.test/",
        "http://[64:ff9b::5db8:d822]/",
    ],
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
        # User info, which parsers split differently.
        "http://user@example.com/",
        "http://user:pass@example.com/",
        "http://@example.com/",
        "http://example.com@127.0.0.1/",
        # Backslashes: a browser-style parser reads this host as 127.0.0.1.
        "http://127.0.0.1\\@example.com/",
        "http://example.com\\path",
        "https:\\\\example.com/",
        # Whitespace and control characters inside, percent-escapes in the host.
        "http://exa mple.com/",
        "http://example.com/\tx",
        "http://127%2e0%2e0%2e1/",
        # Malformed.
        "http://[::1/",
        "http://example.com:99999/",
        # IPv6 forms reaching internal IPv4, literal or resolved.
        "http://[2002:7f00:1::]/",
        "http://[2001:0:4136:e378:8000:63bf:3fff:fdd2]/",
        "http://[64:ff9b::7f00:1]/",
        "http://[::127.0.0.1]/",
        "http://sixtofour.test/",
        "http://teredo.test/",
        "http://nat64-internal.test/",
    ],
)
async def test_other_urls_are_refused(url: str) -> None:
    with pytest.raises(RefusedURL):
        await check_url(url, resolver)
