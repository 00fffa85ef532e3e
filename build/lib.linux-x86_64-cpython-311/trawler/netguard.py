"""Private-network guard: keep the crawler off loopback, LAN and link-local hosts.

A crawl service must not be turned against its own network (DESIGN.md,
"Guarantees"). The check runs on the *resolved* address of every hop, at
connect time, so a public name that resolves to 10.0.0.1, or a redirect to
one, is refused just like a literal ``http://10.0.0.1/``.

Two doors lead to a socket in the fetcher's pools (connectors.py) and both
are guarded here:

- names go through the pool's resolver, which we wrap (:class:`GuardedResolver`);
- IP literals skip the resolver entirely (``HttpPool._addresses``), so
  the fetcher calls :func:`check_literal_host` on each hop's host first.
"""

from __future__ import annotations

import ipaddress
import socket

from aiohttp.abc import AbstractResolver, ResolveResult

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

# RFC 6052 §2.1: the NAT64 well-known prefix embeds an IPv4 address in the low 32 bits.
_NAT64_PREFIX = ipaddress.IPv6Network("64:ff9b::/96")


class PrivateAddressError(OSError):
    """Every address of a host is private, so no connection was attempted.

    An OSError, as resolvers raise; the pool lets it through unwrapped (other
    resolver errors become connectors.DnsError).
    """


def _embedded_ipv4(ip: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    """The IPv4 address an IPv6 address stands for, if it is a transition form."""
    if ip.ipv4_mapped is not None:  # ::ffff:a.b.c.d
        return ip.ipv4_mapped
    if ip.sixtofour is not None:  # 2002:aabb:ccdd::/48 (RFC 3056)
        return ip.sixtofour
    if ip.teredo is not None:  # (server, client) (RFC 4380)
        return ip.teredo[1]
    if ip in _NAT64_PREFIX:
        return ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
    return None


def is_forbidden_address(ip: IPAddress) -> bool:
    """True for any address that is not plainly a public unicast address."""
    if isinstance(ip, ipaddress.IPv6Address):
        embedded = _embedded_ipv4(ip)
        if embedded is not None:  # the IPv4 address is where the packets end up
            return is_forbidden_address(embedded)
    return (
        ip.is_loopback
        or ip.is_private
        or ip.is_link_local
        or ip.is_multicast
        or ip.is_reserved
        or ip.is_unspecified
        or not ip.is_global  # also catches 100.64/10 (RFC 6598 shared space)
    )


def looks_like_ip_literal(host: str) -> bool:
    """aiohttp's own test (helpers.is_ip_address) for hosts it will not resolve."""
    return ":" in host or host.replace(".", "").isdigit()


def check_literal_host(host: str) -> None:
    """Refuse an IP-literal host that is forbidden; names pass (the resolver checks them).

    Raises PrivateAddressError for a forbidden address, ValueError for a host
    that aiohttp would treat as a literal but that is no valid address.
    """
    if not looks_like_ip_literal(host):
        return
    ip = ipaddress.ip_address(host)  # ValueError for e.g. "127.1"; aiohttp refuses those too
    if is_forbidden_address(ip):
        raise PrivateAddressError(f"{host} is a private or reserved address")


def _resolved_is_forbidden(result: ResolveResult) -> bool:
    try:
        return is_forbidden_address(ipaddress.ip_address(result["host"]))
    except ValueError:  # unparsable: fail closed
        return True


class GuardedResolver(AbstractResolver):
    """Wraps a resolver and drops every forbidden address it returns."""

    def __init__(self, inner: AbstractResolver) -> None:
        self._inner = inner

    async def resolve(
        self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
    ) -> list[ResolveResult]:
        results = await self._inner.resolve(host, port, family)
        allowed = [r for r in results if not _resolved_is_forbidden(r)]
        if not allowed:
            raise PrivateAddressError(f"{host} resolves only to private or reserved addresses")
        return allowed

    async def close(self) -> None:
        await self._inner.close()
