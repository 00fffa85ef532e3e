"""The HTTP connection pools of a process, shared by every job's fetcher.

One ``HttpPool`` per reach (with or without the private-address guard,
netguard.py), so jobs share keep-alive connections and the DNS cache. A pool
keeps idle connections (http1.Connection) per (scheme, host, port), reuses the
most recent first (the likeliest still open), never hands out one the server
closed or asked to close, closes those idle past ``IDLE_S``, and keeps at most
``MAX_IDLE_PER_HOST`` of a host. Over all pools of a process, kept connections
are bounded by ``IdleLimit``: each holds a descriptor, and a crawl of more hosts
than the process may hold descriptors otherwise ran out of them (EMFILE) for its
sockets, its WARC files and its database. Once the bound is reached, a
connection that goes idle is closed, not one kept earlier (``IdleLimit`` says
why). A request is never sent twice: a kept
connection that turns out closed fails that request (connection_closed), as a
retry would skip the host's politeness interval. Created on the event loop at
first use; ``close()`` once no fetcher uses them.
"""

from __future__ import annotations

import asyncio
import resource
import socket
import ssl

import aiohttp
from aiohttp.abc import AbstractResolver

from trawler.http1 import Connection, Deadlines
from trawler.httpcodec import FetchError
from trawler.netguard import GuardedResolver, PrivateAddressError, looks_like_ip_literal

DNS_TTL_S = 300
IDLE_S = 15.0  # as aiohttp's keepalive_timeout: servers close theirs after 5-75 s
MAX_IDLE_PER_HOST = 4  # the frontier sends one request at a time to a host
_DNS_CACHE_MAX = 100_000  # names; past it the cache starts over
# Descriptors kept free of idle connections: connections in use (when no limit is
# given), the databases and their WAL files, WARC files, parser pipes, DNS
# sockets, the API's sockets.
FD_RESERVE = 128
IN_USE_UNBOUNDED = 1024  # connections in use assumed when the pools set no limit
MAX_IDLE = 16_384  # kept connections at most, whatever the descriptor limit

Key = tuple[str, str, int]  # scheme, host, port


class DnsError(OSError):
    """A name did not resolve; ``os_error`` is the resolver's error."""

    def __init__(self, host: str, os_error: OSError) -> None:
        super().__init__(f"cannot resolve {host}: {os_error}")
        self.os_error = os_error


def process_idle_limit(in_use_limit: int) -> int:
    """Idle connections a process may keep: what its descriptor limit leaves once
    ``in_use_limit`` connections are in use (0: no limit) and ``FD_RESERVE`` for
    its files, at most ``MAX_IDLE``."""
    soft, _hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        return MAX_IDLE
    room = soft - (in_use_limit or IN_USE_UNBOUNDED) - FD_RESERVE
    return max(0, min(MAX_IDLE, room))


class IdleLimit:
    """The connections a process's pools keep between requests, at most ``limit``:
    given, or read from the descriptor limit at the first idle connection (after
    gcpolicy.py has raised it).

    A connection takes a place when it first goes idle and holds it until it is
    closed (idle past ``IDLE_S``, closed by its server, failed), in use again or
    not. With every place held, a connection that goes idle is closed at once.
    Closing the one idle the longest instead (least recently used) keeps none
    that is used again once a crawl visits more hosts than there are places: the
    frontier takes its hosts in turn, at the pace of their delays, so the host
    idle the longest is the one due next. On the 20,000-host benchmark with
    16,384 places, 94 % of the requests opened a connection that way, 74 % now
    (bench/RESULTS.md, "Issue 14, session 46"; on that slow machine a host's turn
    came every ~18 s, past ``IDLE_S``, which closed most of the rest): the hosts
    that hold a place keep it, and only the others open one a request. Places
    free up as connections close, so the hosts of a crawl's later phase take them
    within ``IDLE_S``.
    """

    __slots__ = ("_limit", "_in_use_limit", "_kept")

    def __init__(self, in_use_limit: int = 0, limit: int | None = None) -> None:
        self._in_use_limit = in_use_limit
        self._limit = limit
        self._kept: dict[Connection, HttpPool] = {}

    @property
    def limit(self) -> int:
        if self._limit is None:
            self._limit = process_idle_limit(self._in_use_limit)
        return self._limit

    def add(self, conn: Connection, pool: HttpPool) -> None:
        """``conn`` has just gone idle: it keeps its place, takes a free one, or is
        closed."""
        kept = self._kept
        if conn in kept:
            return
        if len(kept) < self.limit:
            kept[conn] = pool
            return
        pool.evict(conn)

    def remove(self, conn: Connection) -> None:
        """``conn`` is closed: its place is free."""
        self._kept.pop(conn, None)

    def __len__(self) -> int:
        return len(self._kept)


class HttpPool:
    """Keep-alive HTTP/1.1 connections of one reach, and its DNS cache."""

    def __init__(
        self,
        limit: int,
        allow_private: bool,
        resolver: AbstractResolver | None,
        idle_s: float = IDLE_S,
        idle_limit: IdleLimit | None = None,
    ) -> None:
        """``limit``: connections in use at once, 0 for no limit; ``idle_s``: how
        long an idle connection is kept; ``idle_limit``: the process's bound on idle
        connections (shared by its pools)."""
        self._idle_s = idle_s
        self._idle_limit = IdleLimit(limit) if idle_limit is None else idle_limit
        self._owns_resolver = resolver is None  # a resolver passed in is its owner's to close
        resolver = resolver or aiohttp.DefaultResolver()
        self._resolver = resolver if allow_private else GuardedResolver(resolver)
        self._limit = asyncio.Semaphore(limit) if limit > 0 else None
        self._dns: dict[tuple[str, int], tuple[float, list[str]]] = {}
        self._idle: dict[Key, list[Connection]] = {}
        self._conns: set[Connection] = set()
        self._sweeper: asyncio.TimerHandle | None = None
        self._deadlines: Deadlines | None = None  # of its connections' requests, on the loop
        self._ssl: ssl.SSLContext | None = None
        self.closed = False

    async def connect(
        self, key: Key, connect_by: float, head_by: float, head_timeout_s: float
    ) -> Connection:
        """An open connection to ``key``: the newest idle one, or a new one opened by
        ``connect_by`` (monotonic) and ``head_by`` (when the response headers are due,
        ``head_timeout_s`` after the request began). Give it back with ``release()``."""
        if self._limit is not None:
            await self._slot(head_by, head_timeout_s)
        try:
            return self._reuse(key) or await self._open(key, connect_by, head_by, head_timeout_s)
        except BaseException:
            if self._limit is not None:
                self._limit.release()
            raise

    def release(self, conn: Connection) -> None:
        """Back to the idle list if the exchange left it reusable, else closed."""
        if self._limit is not None:
            self._limit.release()
        if self.closed or not conn.reusable:
            self._discard(conn)
            return
        idle = self._idle.setdefault(conn.key, [])
        idle.append(conn)
        if len(idle) > MAX_IDLE_PER_HOST:
            self._discard(idle.pop(0))  # the oldest: the likeliest to be closed by now
        self._idle_limit.add(conn, self)  # (may close conn itself when the limit is 0)
        if self._sweeper is None:
            self._sweeper = asyncio.get_running_loop().call_later(self._idle_s, self._sweep)

    async def close(self) -> None:
        self.closed = True
        if self._sweeper is not None:
            self._sweeper.cancel()
            self._sweeper = None
        if self._deadlines is not None:
            self._deadlines.close()
            self._deadlines = None
        conns, self._idle = list(self._conns), {}
        for conn in conns:
            self._discard(conn)
        if self._owns_resolver:
            await self._resolver.close()

    async def _slot(self, head_by: float, head_timeout_s: float) -> None:
        """One of the ``limit`` connections in use; waiting for it counts toward the
        request's first-byte deadline (as the wait for aiohttp's connector did)."""
        assert self._limit is not None
        if not self._limit.locked():
            await self._limit.acquire()  # at once
            return
        try:
            async with asyncio.timeout_at(head_by):
                await self._limit.acquire()
        except TimeoutError:
            detail = f"no response headers within {head_timeout_s:g} s"
            raise FetchError("timeout", detail) from None

    def _reuse(self, key: Key) -> Connection | None:
        idle = self._idle.get(key)
        if not idle:
            return None
        oldest_kept = asyncio.get_running_loop().time() - self._idle_s
        while idle:
            conn = idle.pop()  # LIFO
            if conn.reusable and conn.idle_since > oldest_kept:
                return conn  # it keeps its place in the idle limit while in use
            self._discard(conn)
        return None

    def evict(self, conn: Connection) -> None:
        """Close an idle connection that found no place (IdleLimit)."""
        idle = self._idle.get(conn.key)
        if idle is not None and conn in idle:
            idle.remove(conn)
            if not idle:
                del self._idle[conn.key]
        self._discard(conn)

    async def _open(
        self, key: Key, connect_by: float, head_by: float, head_timeout_s: float
    ) -> Connection:
        scheme, host, port = key
        loop = asyncio.get_running_loop()
        try:
            async with asyncio.timeout_at(min(connect_by, head_by)):
                addresses = await self._addresses(host, port)
                conn = await self._connect_any(loop, key, addresses)
        except TimeoutError:
            if loop.time() < head_by:
                raise TimeoutError(f"connecting to {host}:{port} timed out") from None
            detail = f"no response headers within {head_timeout_s:g} s"
            raise FetchError("timeout", detail) from None
        self._conns.add(conn)
        return conn

    async def _connect_any(
        self, loop: asyncio.AbstractEventLoop, key: Key, addresses: list[str]
    ) -> Connection:
        """The first address that accepts, in the resolver's order (as aiohttp)."""
        scheme, host, port = key
        tls = self._ssl_context() if scheme == "https" else None
        if self._deadlines is None or self._deadlines.loop is not loop:
            self._deadlines = Deadlines(loop)  # (a pool used on a later loop: a new tick)
        deadlines = self._deadlines
        error: OSError | None = None
        for address in addresses:
            try:
                _, conn = await loop.create_connection(
                    lambda: Connection(key, loop, deadlines),
                    address,
                    port,
                    ssl=tls,
                    server_hostname=host.rstrip(".") if tls else None,
                )
                return conn
            except ssl.SSLError:
                raise  # the address answered: another would not make TLS succeed
            except OSError as exc:
                error = exc
        assert error is not None
        raise error

    async def _addresses(self, host: str, port: int) -> list[str]:
        """The host's addresses, cached ``DNS_TTL_S``; IP literals skip the resolver."""
        if looks_like_ip_literal(host):
            return [host.strip("[]")]
        loop = asyncio.get_running_loop()
        cached = self._dns.get((host, port))
        if cached is not None and cached[0] > loop.time():
            return cached[1]
        try:
            results = await self._resolver.resolve(host, port, family=socket.AF_UNSPEC)
        except PrivateAddressError:
            raise
        except OSError as exc:
            raise DnsError(host, exc) from exc
        addresses = [r["host"] for r in results]
        if len(self._dns) >= _DNS_CACHE_MAX:
            self._dns.clear()
        self._dns[host, port] = (loop.time() + DNS_TTL_S, addresses)
        return addresses

    def _ssl_context(self) -> ssl.SSLContext:
        if self._ssl is None:  # as aiohttp's default: verified, HTTP/1.1 by ALPN
            self._ssl = ssl.create_default_context()
            self._ssl.set_alpn_protocols(["http/1.1"])
        return self._ssl

    def _sweep(self) -> None:
        """Close the connections idle past idle_s; run again while any stay idle."""
        self._sweeper = None
        oldest_kept = asyncio.get_running_loop().time() - self._idle_s
        for key, idle in list(self._idle.items()):
            kept = [c for c in idle if c.reusable and c.idle_since > oldest_kept]
            for conn in idle:
                if conn not in kept:
                    self._discard(conn)
            if kept:
                self._idle[key] = kept
            else:
                del self._idle[key]
        if self._idle:
            self._sweeper = asyncio.get_running_loop().call_later(self._idle_s / 3, self._sweep)

    def _discard(self, conn: Connection) -> None:
        conn.close()
        self._conns.discard(conn)
        self._idle_limit.remove(conn)


class Connectors:
    def __init__(
        self,
        limit: int = 0,
        resolver: AbstractResolver | None = None,
        idle_s: float = IDLE_S,
        max_idle: int | None = None,
    ) -> None:
        """``limit``: connections in use at once per reach, 0 for no limit;
        ``resolver`` replaces the system resolver (tests pass a stub);
        ``idle_s``: how long an idle connection is kept; ``max_idle``: kept
        connections over all pools (``IdleLimit``), None: what the descriptor
        limit leaves."""
        self.limit = limit
        self.resolver = resolver
        self.idle_s = idle_s
        self.idle = IdleLimit(limit, max_idle)  # over all the pools
        self._by_reach: dict[bool, HttpPool] = {}

    def get(self, allow_private: bool) -> HttpPool:
        pool = self._by_reach.get(allow_private)
        if pool is None or pool.closed:
            pool = HttpPool(self.limit, allow_private, self.resolver, self.idle_s, self.idle)
            self._by_reach[allow_private] = pool
        return pool

    async def close(self) -> None:
        pools, self._by_reach = list(self._by_reach.values()), {}
        for pool in pools:
            await pool.close()
