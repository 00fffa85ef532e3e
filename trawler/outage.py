"""Riding out an outage of a service a distributed worker needs (Redis, PostgreSQL).

A call that fails because its service is unreachable is tried again with
capped exponential back-off, for as long as the outage lasts: a worker never
exits because Redis restarted or PostgreSQL was stopped for a while. Its
caller simply waits, so an outage is never recorded as an error of a URL.

The worker logs one line when it loses a service and one when it is back,
however many calls were waiting. Each worker builds one ``ServiceHealth`` per
service and hands it to everything that talks to that service; there is no
module-level state.

Every call retried here must be safe to repeat after an unknown outcome (the
connection can drop after the server acted): the frontier's scripts are
idempotent, pages are stored ``ON CONFLICT DO NOTHING``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

from trawler.slowstop import wait_event

T = TypeVar("T")

log = logging.getLogger("trawler")

BACKOFF_BASE_S = 0.1
BACKOFF_CAP_S = 2.0  # also the longest a worker takes to notice that a service is back


class OutageAbandoned(asyncio.CancelledError):
    """A call given up because the worker is stopping while its service is down.

    A ``CancelledError``: the fetch task that made the call ends as if it were
    cancelled (its URL stays leased and is fetched again later), and is never
    recorded as an ``internal`` error of its URL by the engine's catch-all.
    """


class ServiceUnavailable(Exception):
    """The worker stopped during an outage: what it had not committed is given up."""


class ServiceHealth:
    """One service as one worker sees it: up, or down since when."""

    def __init__(
        self,
        name: str,
        address: str,
        transient: Callable[[BaseException], bool],
        *,
        base_s: float = BACKOFF_BASE_S,
        cap_s: float = BACKOFF_CAP_S,
    ) -> None:
        self.name = name
        self.address = address  # for the log line; never holds a password
        self.transient = transient
        self.base_s = base_s
        self.cap_s = cap_s
        self.down_since: float | None = None  # monotonic
        self._up_since = time.monotonic()
        self._up = asyncio.Event()
        self._up.set()
        self._stopping = asyncio.Event()
        self._rng = random.Random()

    @property
    def up(self) -> bool:
        return self.down_since is None

    async def wait_up(self) -> None:
        await self._up.wait()

    def stop(self) -> None:
        """The worker is stopping: calls stop retrying and raise ``OutageAbandoned``."""
        self._stopping.set()

    async def call(self, operation: Callable[[], Awaitable[T]]) -> T:
        """``operation()``, tried again through an outage of any length."""
        attempt = 0
        while True:
            started = time.monotonic()
            try:
                result = await (operation() if self.up else self._stoppable(operation))
            except Exception as exc:
                if not self.transient(exc):
                    raise
                self._lost(exc, started)
                await self._back_off(attempt)
                attempt += 1
                continue
            self._regained()
            return result

    async def _stoppable(self, operation: Callable[[], Awaitable[T]]) -> T:
        """During an outage a try can wait long inside a client (a pool waiting for a
        connection): stopping cancels it rather than waiting for it to time out."""
        task = asyncio.ensure_future(operation())
        stopping = asyncio.ensure_future(self._stopping.wait())
        try:
            await asyncio.wait({task, stopping}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            stopping.cancel()
        if not task.done():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
            raise OutageAbandoned(f"{self.name} at {self.address} is down and the worker stops")
        return task.result()

    def _lost(self, exc: BaseException, started: float) -> None:
        # A call that began before the service came back failed on a connection
        # from before the outage: not a new outage.
        if self.down_since is not None or started < self._up_since:
            return
        self.down_since = time.monotonic()
        self._up.clear()
        cause = " ".join(str(exc).split()).rstrip(".") or type(exc).__name__
        log.warning("lost %s at %s: %s; retrying", self.name, self.address, cause)

    def _regained(self) -> None:
        if self.down_since is None:
            return
        now = time.monotonic()
        log.warning("%s back after %.0f s", self.name, now - self.down_since)
        self.down_since = None
        self._up_since = now
        self._up.set()

    async def _back_off(self, attempt: int) -> None:
        delay_s = min(self.cap_s, self.base_s * 2**attempt) * self._rng.uniform(0.5, 1.0)
        if not self._stopping.is_set():
            await wait_event(self._stopping, delay_s)
        if self._stopping.is_set():
            raise OutageAbandoned(f"{self.name} at {self.address} is down and the worker stops")


async def guarded(health: ServiceHealth | None, operation: Callable[[], Awaitable[T]]) -> T:
    """Through ``health`` when given; one attempt otherwise (commands that should
    fail at once, such as `trawler stats`)."""
    if health is None:
        return await operation()
    return await health.call(operation)


def redis_health(url: str) -> ServiceHealth:
    from trawler.frontier.redis_conn import transient_redis_error

    return ServiceHealth("Redis", _address(url), transient_redis_error)


def postgres_health(url: str) -> ServiceHealth:
    import psycopg
    from psycopg_pool import PoolClosed

    def transient(exc: BaseException) -> bool:
        # Connection lost or refused, AdminShutdown, CannotConnectNow, PoolTimeout;
        # a pool we closed ourselves is not an outage.
        return isinstance(exc, psycopg.OperationalError) and not isinstance(exc, PoolClosed)

    return ServiceHealth("PostgreSQL", _address(url), transient)


def _address(url: str) -> str:
    """host:port of a service URL, without user or password."""
    from urllib.parse import urlsplit

    try:
        parts = urlsplit(url)
        return f"{parts.hostname}:{parts.port}" if parts.port else str(parts.hostname)
    except ValueError:
        return "?"


__all__ = [
    "OutageAbandoned",
    "ServiceHealth",
    "ServiceUnavailable",
    "guarded",
    "postgres_health",
    "redis_health",
]
