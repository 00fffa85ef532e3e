"""The frontier contract, shared by the embedded and distributed backends.

A frontier owns the URL-seen set, the per-host queues and the politeness
slots. The engine asks it for the next URL whose host may be contacted now;
that URL is *leased* to the engine until it is acknowledged (its page and
links committed) or handed back (shutdown, host not ready). At most one
request is in flight per host: the host stays busy from ``next()`` until
``finish_host()``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from trawler.frontier.hosts import HostTable
from trawler.politeness import PolitenessPolicy
from trawler.records import CrawlRequest, RobotsFetch


class Frontier(Protocol):
    def set_policy(self, policy: PolitenessPolicy) -> None:
        """Politeness settings changed while the crawl runs: apply them from now on."""

    def share_hosts(self, table: HostTable) -> None:
        """Hold politeness per host across the process's jobs (Services), from now on."""

    async def filter_new(self, requests: Sequence[CrawlRequest]) -> list[CrawlRequest]:
        """Drop URLs seen before (by fingerprint) and mark the rest seen."""

    async def next(self) -> CrawlRequest | None:
        """Lease the next URL whose host is ready; wait for one if none is.

        Returns None when the frontier is closed, or when nothing is queued
        and nothing is leased (the crawl is complete).
        """

    def record_sent(self, host: str, sent_at: float) -> None:
        """A request to ``host`` left at monotonic ``sent_at``: space the next one."""

    def record_response(
        self, host: str, status: int | None, error: str | None, retry_after_s: float | None
    ) -> None:
        """A response (or failure) from ``host``: let it shape the host's pace (retry.py)."""

    async def retry_later(self, request: CrawlRequest, delay_s: float) -> None:
        """Keep the lease and queue the URL again after ``delay_s`` (its host is not delayed)."""

    async def finish_host(self, host: str) -> None:
        """The engine is done with the host slot it got from ``next()``."""

    async def acquire_host(self, host: str) -> None:
        """Take a host slot outside ``next()`` (same-host redirect hops, robots.txt)."""

    def set_crawl_delay(self, host: str, crawl_delay_s: float | None) -> None:
        """robots.txt gave the host a Crawl-delay (or none)."""

    def host_wait_s(self, host: str) -> float:
        """While holding ``host``: seconds until its next request may start (<= 0: now)."""

    async def wait_host_ready(self, host: str) -> None:
        """While holding ``host``, wait until its next request may start."""

    async def hand_back(self, request: CrawlRequest, delay_s: float = 0.0) -> None:
        """Return a leased URL unacknowledged; its host waits ``delay_s`` more."""

    async def shared_robots(self, site: str, profile: str) -> RobotsFetch | None:
        """robots.txt of ``site`` as fetched before, by another worker or an earlier
        run, while it is kept; only a fetch made with the same ``profile``
        (Fetcher.profile: the request headers, the reach of the private-address guard)."""

    async def share_robots(
        self, site: str, profile: str, fetch: RobotsFetch, ttl_s: float, *, job_only: bool
    ) -> None:
        """Keep a fetched robots.txt for ``ttl_s`` seconds: for this job's other
        workers and later runs, and unless ``job_only`` for other jobs of that profile."""

    def close(self) -> None:
        """Stop handing out URLs; a waiting ``next()`` returns None."""

    @property
    def queued(self) -> int: ...

    @property
    def leased(self) -> int: ...

    @property
    def active_hosts(self) -> int: ...
