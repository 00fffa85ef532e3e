"""robots.txt for revisits: a page allowed when it was crawled may be disallowed now.

Each host's robots.txt is fetched again before its first revisit of a run and
whenever the copy is older than 24 hours (RFC 9309 §2.4), through the host's lane,
so the request is spaced like any other; what the answer means is robotscache.py's
``entry_from_fetch`` (RFC 9309 §2.3.1), as in the crawl. Its Crawl-delay replaces
the one the crawl kept.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from urllib.parse import urlsplit

from trawler.records import FetchResult
from trawler.robotscache import RobotsEntry, entry_from_fetch


@dataclass(slots=True)
class RobotsVerdict:
    allowed: bool
    crawl_delay_s: float | None  # from the robots.txt, uncapped
    known: bool = True  # False: robots.txt unavailable (5xx, 429, network): ask again soon


def robots_url(page_url: str) -> str:
    parts = urlsplit(page_url)
    return f"{parts.scheme}://{parts.netloc}/robots.txt"


class HostRobots:
    """One host's robots.txt as the recrawl last read it."""

    __slots__ = ("_entry", "_token", "_retry_waits_s")

    def __init__(self, token: str, retry_waits_s: tuple[float, ...]) -> None:
        self._entry: RobotsEntry | None = None
        self._token = token
        self._retry_waits_s = retry_waits_s

    def needs_fetch(self) -> bool:
        return self._entry is None or self._entry.expired(time.monotonic())

    def update(self, result: FetchResult) -> None:
        self._entry = entry_from_fetch(
            result, self._token, time.monotonic(), self._entry, self._retry_waits_s
        )

    def verdict(self, url: str) -> RobotsVerdict:
        """Allowed or not now; an unavailable robots.txt (5xx, network) allows nothing."""
        entry = self._entry
        if entry is None or entry.unavailable:
            return RobotsVerdict(False, None, known=False)
        return RobotsVerdict(entry.rules.allowed(url), entry.rules.crawl_delay)
