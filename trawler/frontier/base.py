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
    # Whether a URL ``filter_new`` found new once is never new again while this
    # frontier is open (the parser processes are told such links: knownlinks.py).
    seen_lasts: bool

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

    async def render_misses(self, host: str | None = None) -> dict[str, int]:
        """--render auto: each host's (or ``host``'s) renders in a row that added
        nothing, as kept by an earlier run or another worker of the job
        (render/shell.py); hosts with none are left out."""

    async def count_render_miss(self, host: str, added: bool) -> int:
        """Keep that a render of ``host`` added something (its count starts again) or
        not (one more); the host's count now, over every worker of the job."""

    def close(self) -> None:
        """Stop handing out URLs; a waiting ``next()`` returns None."""

    @property
    def queued(self) -> int: ...

    @property
    def leased(self) -> int: ...

    @property
    def active_hosts(self) -> int: ...


class Revisitable(Frontier, Protocol):
    """A frontier that also hands out due revisits of stored pages (issue 15; the
    embedded one so far). Revisits are ``CrawlRequest``s of kind ``revisit``
    (recrawl_lanes.py) leased through ``next()`` like new URLs, under the same host
    slots: one request in flight per host, one interval between any two. A host with
    new URLs queued gives revisits at most every other turn; a host with only
    revisits gives them every turn. Handed back or retried, a revisit goes back to
    its host's lane, never into the URL queues; it is acknowledged by ``ack()`` with
    the batch that records it, after ``revisits_done``.

    The Redis frontier has the same lanes and rule (frontier/redis_revisits.py), fed
    and acknowledged asynchronously by the distributed backend (store/dist_revisits.py)
    rather than through the synchronous methods below.
    """

    def set_revisit_mode(self, continuous: bool, discovery: bool) -> None:
        """``continuous``: more revisits may come, so ``next()`` waits instead of
        returning None when nothing is queued; ``discovery`` False: queued new URLs
        are not handed out (a revisit pass whose only work is the due pages)."""

    def revisit_poll_started(self) -> int:
        """A read of due pages begins: the number to pass to ``add_revisits``."""

    def add_revisits(self, requests: Sequence[CrawlRequest], poll: int | None) -> int:
        """Queue due revisits, skipping pages already queued or leased and pages whose
        visit was committed after ``poll`` began; returns how many were queued."""

    def revisits_done(self, urls: Sequence[str]) -> None:
        """Those pages' visits are committed (called before their ``ack()``)."""

    def drop_kept_robots(self) -> None:
        """Fetch robots.txt again rather than use one an earlier run kept (a revisit
        pass asked for later sees the rules as they are now)."""

    @property
    def revisits_pending(self) -> int:
        """Revisits queued or leased, not yet committed."""
