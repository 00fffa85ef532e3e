"""Due revisits inside the frontier: one lane per host beside the host's queue of new
URLs, and the rule that shares the host's turns between the two (issue 15).

A host's turn (one lease from the frontier's ready-heap, so one politeness interval)
goes to a revisit only when the host's previous turn did not, or when the host has
no new URL queued: a host with new URLs gives revisits at most every other turn, so
discovery is never starved, and a host with only revisits gives them every turn.
Spacing, robots.txt, back-off and the one-request-per-host rule are the frontier's
and the engine's as for any URL: a revisit is a ``CrawlRequest`` of kind
``revisit`` carrying its page's ``RevisitState``.

Lanes live in memory only. The durable truth is ``revisit_state.next_visit_at``,
moved on by the commit that records the visit: a revisit leased and lost (kill -9)
is still due on restart, and a page is in at most one lane or lease at a time
(``_pending``), so it is never visited twice for one due time. ``poll_started`` /
``fresh`` keep a poll of due rows read before a visit's commit from bringing that
visit back once its commit has forgotten the page.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Sequence

from trawler.dedup import url_fingerprint
from trawler.records import CrawlRequest
from trawler.store.versions import RevisitState

REVISIT = "revisit"  # CrawlRequest.kind of a revisit


def revisit_request(state: RevisitState, depth: int) -> CrawlRequest:
    """The request that revisits a stored page (``depth``: the page's, for its links)."""
    request = CrawlRequest(state.url, depth, None, state.host, url_fingerprint(state.url),
                           kind=REVISIT)  # fmt: skip
    request.revisit = state
    return request


def state_of(request: CrawlRequest) -> RevisitState:
    state = request.revisit
    assert isinstance(state, RevisitState), request.url
    return state


class RevisitLanes:
    """Per-host lanes of due revisits and the turn rule (see the module's docstring)."""

    __slots__ = ("_lanes", "_pending", "_last_was_revisit", "_acked", "_polls", "_queued",
                 "continuous", "discovery")  # fmt: skip

    def __init__(self) -> None:
        self._lanes: dict[str, deque[CrawlRequest]] = {}
        self._pending: set[str] = set()  # URLs in a lane or leased
        self._last_was_revisit: set[str] = set()  # hosts whose last turn was a revisit's
        self._acked: dict[str, int] = {}  # URL -> poll count when its visit was committed
        self._polls = 0
        self._queued = 0  # revisits in lanes (not leased)
        self.continuous = False  # more revisits may come: the frontier is never exhausted
        self.discovery = True  # False: revisits are the run's only work (`trawler recrawl`)

    # -- feeding ---------------------------------------------------------------------
    def poll_started(self) -> int:
        """A read of due rows begins; pass the number to ``add``."""
        self._polls += 1
        return self._polls

    def add(self, requests: Iterable[CrawlRequest], poll: int | None = None) -> list[str]:
        """Queue revisits not pending already (nor committed since the ``poll`` that
        read them began); returns the hosts that got one."""
        hosts = []
        for request in requests:
            url = request.url
            if url in self._pending or (poll is not None and self._acked.get(url, -1) >= poll):
                continue
            self._pending.add(url)
            self._lanes.setdefault(request.host, deque()).append(request)
            self._queued += 1
            hosts.append(request.host)
        if poll is not None and poll == self._polls:
            self._acked.clear()  # later polls read those commits' rows
        return hosts

    def put_back(self, request: CrawlRequest) -> None:
        """A leased revisit not sent (handed back, retried later): first in its lane."""
        self._lanes.setdefault(request.host, deque()).appendleft(request)
        self._queued += 1
        self._last_was_revisit.discard(request.host)

    def done(self, urls: Sequence[str]) -> None:
        """Their visits are committed: the pages may be polled again."""
        for url in urls:
            self._pending.discard(url)
            self._acked[url] = self._polls

    # -- the turn rule -----------------------------------------------------------------
    def has(self, host: str) -> bool:
        return bool(self._lanes.get(host))

    def schedulable(self, host: str, has_new: bool) -> bool:
        """Whether the host has work for the frontier's ready-heap."""
        return (has_new and self.discovery) or self.has(host)

    def take(self, host: str, has_new: bool) -> CrawlRequest | None:
        """The revisit this turn of ``host`` goes to, or None (a new URL's turn)."""
        lane = self._lanes.get(host)
        has_new = has_new and self.discovery
        if not lane or (has_new and host in self._last_was_revisit):
            self._last_was_revisit.discard(host)
            return None
        request = lane.popleft()
        self._queued -= 1
        if not lane:
            del self._lanes[host]
        self._last_was_revisit.add(host)
        return request

    @property
    def queued(self) -> int:
        return self._queued

    @property
    def pending(self) -> int:
        return len(self._pending)
