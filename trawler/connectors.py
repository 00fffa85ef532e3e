"""The HTTP connection pools of a process, shared by every job's fetcher.

One aiohttp ``TCPConnector`` per reach (with or without the private-address
guard, netguard.py), so jobs share keep-alive connections and the DNS cache.
Each job's ``Fetcher`` opens its own light ``ClientSession`` over them (its
headers, timeouts and cookie policy are its own) without owning the pool.
Created on the event loop at first use; ``close()`` once no fetcher uses them.
"""

from __future__ import annotations

import aiohttp
from aiohttp.abc import AbstractResolver

from trawler.netguard import GuardedResolver

DNS_TTL_S = 300


def new_connector(
    limit: int, allow_private: bool, resolver: AbstractResolver | None = None
) -> aiohttp.TCPConnector:
    """``limit``: connections in use at once, 0 for none (each job's dispatch bounds its own)."""
    resolver = resolver or aiohttp.DefaultResolver()
    if not allow_private:
        resolver = GuardedResolver(resolver)
    return aiohttp.TCPConnector(
        limit=limit,
        limit_per_host=0,  # politeness is the frontier's job
        ttl_dns_cache=DNS_TTL_S,
        resolver=resolver,
    )


class Connectors:
    def __init__(self, limit: int = 0, resolver: AbstractResolver | None = None) -> None:
        """``resolver`` replaces the system resolver (tests pass a stub)."""
        self.limit = limit
        self.resolver = resolver
        self._by_reach: dict[bool, aiohttp.TCPConnector] = {}

    def get(self, allow_private: bool) -> aiohttp.TCPConnector:
        connector = self._by_reach.get(allow_private)
        if connector is None or connector.closed:
            connector = new_connector(self.limit, allow_private, self.resolver)
            self._by_reach[allow_private] = connector
        return connector

    async def close(self) -> None:
        connectors, self._by_reach = list(self._by_reach.values()), {}
        for connector in connectors:
            await connector.close()
