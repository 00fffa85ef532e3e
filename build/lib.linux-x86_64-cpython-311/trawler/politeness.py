"""Per-host politeness state: when a host may next be contacted, and why.

A ``HostSlot`` is the explicit state of one host (Scrapy's downloader slot,
Mercator's back queue). The frontier orders slots by ``next_allowed_at``;
this module only decides intervals, it does no I/O and keeps no globals.

Times are ``time.monotonic()`` seconds.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from trawler.config import CrawlConfig
from trawler.retry import HostHealth, RetryPolicy, extra_interval_s, not_before

# Added to every interval. The client stamps a request when its headers leave; the
# server stamps it when its loop reads them, later under load and not by the same
# amount each time: a server reading a burst of requests one after the other reads
# the last ones late, and the next request of such a host looks early. At 10 ms,
# nginx's log of the 2,000-host benchmark at ~1,850 pages/s showed 165 gaps of
# 0.989-0.999 s (bursts of ~170 requests in 10 ms; 8 with two nginx workers); at
# 25 ms none, at the same throughput (bench/RESULTS.md, issue 14, session 28).
SPACING_MARGIN_S = 0.025

Released = Callable[[str], None]


@dataclass(slots=True)
class HostClaim:
    """A host's state shared by every job of the process."""

    host: str
    holder: object | None = None  # the frontier with a request to the host in flight
    last_sent_at: float | None = None  # monotonic; the last request to it, any job's
    next_allowed_at: float = 0.0  # the latest next-allowed time any job set
    waiters: set[Released] | None = None  # frontiers to tell when it is released


@dataclass(slots=True)
class HostSlot:
    """Politeness state of one host (``host[:port]``)."""

    host: str
    next_allowed_at: float = 0.0  # monotonic time before which no request may start
    last_sent_at: float | None = None  # when the last request's headers were sent
    busy: bool = False  # a request to this host is in flight (at most one)
    crawl_delay_s: float | None = None  # from robots.txt, already capped
    health: HostHealth = field(default_factory=HostHealth)  # back-off after 429/503, pauses
    in_heap_at: float | None = None  # the key under which the slot sits in the ready-heap
    claim: HostClaim | None = None  # the host's state shared with the process's other jobs


def unproven_limit(concurrency: int) -> int:
    """Requests in flight at once to hosts that did not answer their last request
    (or were never contacted): a quarter of the slots is kept for hosts that answer."""
    return max(1, concurrency - max(1, concurrency // 4))


@dataclass(slots=True, frozen=True)
class PolitenessPolicy:
    """The configured side of politeness, shared by all hosts."""

    delay_s: float = 1.0
    max_crawl_delay_s: float = 60.0
    retry: RetryPolicy = field(default_factory=RetryPolicy)

    @classmethod
    def from_config(cls, config: CrawlConfig) -> PolitenessPolicy:
        # A host that did not answer is paused as long as it kept a slot waiting.
        waited_s = min(config.first_byte_timeout_s, config.timeout_s)
        retry = RetryPolicy(max_attempts=config.max_attempts, timeout_pause_s=waited_s)
        return cls(config.delay_s, config.max_crawl_delay_s, retry)

    def interval_s(self, slot: HostSlot) -> float:
        """Start-to-start interval for a host: max(delay, Crawl-delay) + back-off."""
        crawl_delay = min(slot.crawl_delay_s or 0.0, self.max_crawl_delay_s)
        return max(self.delay_s, crawl_delay) + extra_interval_s(slot.health)

    def after_request(self, slot: HostSlot, sent_at: float) -> None:
        """Record that a request to the host was sent at ``sent_at``.

        Spacing is measured from the moment the request left (as close to
        what the server sees as the client can know), not from when it was
        scheduled, so the server's log shows at least the interval.
        """
        slot.last_sent_at = sent_at
        ready_at = sent_at + self.interval_s(slot) + SPACING_MARGIN_S
        slot.next_allowed_at = max(slot.next_allowed_at, ready_at)

    def after_response(
        self, slot: HostSlot, status: int | None, error: str | None, retry_after_s: float | None,
        now: float,
    ) -> None:  # fmt: skip
        """Let the host's answer slow it down (429/503, failures) or let it recover."""
        backoff_s = slot.health.backoff_s
        self.retry.on_response(slot.health, status, error, retry_after_s, now)
        if slot.last_sent_at is not None and slot.health.backoff_s < backoff_s:
            # Recovering: the interval after this request is the shorter one now, not
            # the one its sending set from the back-off as it was.
            slot.next_allowed_at = slot.last_sent_at + self.interval_s(slot) + SPACING_MARGIN_S
        elif slot.last_sent_at is not None:
            self.after_request(slot, slot.last_sent_at)  # the interval may have grown
        slot.next_allowed_at = max(slot.next_allowed_at, not_before(slot.health))

    def recompute(self, slot: HostSlot) -> None:
        """The settings changed (live): the host's next-allowed time under this policy,
        which may be sooner than under the old one."""
        ready_at = not_before(slot.health)
        if slot.last_sent_at is not None:
            ready_at = max(ready_at, slot.last_sent_at + self.interval_s(slot) + SPACING_MARGIN_S)
        slot.next_allowed_at = ready_at

    def set_crawl_delay(self, slot: HostSlot, crawl_delay_s: float | None) -> None:
        """Apply a robots.txt Crawl-delay, also to the gap after the robots.txt request itself."""
        slot.crawl_delay_s = crawl_delay_s
        if slot.last_sent_at is not None:
            self.after_request(slot, slot.last_sent_at)
