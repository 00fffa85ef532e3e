"""An online importance estimate for ``--priority importance`` (issue 18).

OPIC (Abiteboul, Preda and Cobena, "Adaptive on-line page importance
computation", WWW 2003): every page holds *cash*; a seed starts with
``SEED_CASH``; a fetched page hands its cash out in equal shares to the pages it
links to, and the pages not fetched yet are ordered by the cash they received so
far (their importance estimate, kept up as pages are fetched). A page that many
pages link to, or a few important ones, gathers cash fast: on a web whose
in-degree follows a power law that finds the most-linked pages early (bench/
RESULTS.md, "Issue 18").

Kept in memory, per queued URL only: a URL's cash leaves the table when it is
leased and travels on the request (``CrawlRequest.importance``) until its
page's links share it out (discovery.py), or it is queued again (handed back,
retried). Shares for pages fetched already are dropped: a one-pass crawl does
not visit them again. The cash of queued URLs is kept across a restart
(importance_store.py writes what changed with each commit): a resumed crawl
goes on in the order it had.

Each host's total cash orders the hosts not visited yet (frontier/sqlite.py);
``risen`` names the hosts whose total rose, so the frontier re-ranks only those.
Loop-only, no I/O.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from trawler.config import CrawlConfig
from trawler.records import CrawlRequest

SEED_CASH = 1.0
IMPORTANCE_WINDOW = 256  # URLs of a host in memory to pick from (disk_queue.py window)


class Importance:
    def __init__(self) -> None:
        self._cash: dict[int, float] = {}  # fp -> cash of a queued URL
        self._host_cash: dict[str, float] = {}  # host -> cash of its queued URLs
        self.risen: set[str] = set()  # hosts whose cash rose since the frontier looked
        self._changed: dict[int, str] = {}  # fp -> host, credited since take_changes

    def queued(self, request: CrawlRequest) -> None:
        """A URL enters its host's queue: a seed with its starting cash, a URL handed
        back with the cash it carried, a new one with the shares it got already."""
        carried, request.importance = request.importance, 0.0
        if not carried and request.parent_url is None and request.fp not in self._cash:
            carried = SEED_CASH
        self._credit(request.host, request.fp, carried)

    def leased(self, request: CrawlRequest) -> None:
        """The URL leaves the queue: its cash goes with it."""
        cash = self._cash.pop(request.fp, 0.0)
        request.importance = cash
        host_cash = self._host_cash.get(request.host, 0.0) - cash
        self._host_cash[request.host] = max(host_cash, 0.0)

    def spread(
        self, page: CrawlRequest, links: Sequence[CrawlRequest], new: Iterable[CrawlRequest]
    ) -> None:
        """``page`` was fetched: its cash in equal shares to its ``links``, to the
        URLs among them still queued or ``new`` (about to be)."""
        cash, page.importance = page.importance, 0.0
        if cash <= 0.0 or not links:
            return
        share = cash / len(links)
        known = self._cash
        for request in new:
            known.setdefault(request.fp, 0.0)
        for request in links:
            if request.fp in known:
                self._credit(request.host, request.fp, share)

    def rank(self, request: CrawlRequest) -> float:
        """The URL's importance now (its cash; a leased URL: what it carries)."""
        return self._cash.get(request.fp, request.importance)

    def host_rank(self, host: str) -> float:
        return self._host_cash.get(host, 0.0)

    def _credit(self, host: str, fp: int, cash: float) -> None:
        self._cash[fp] = self._cash.get(fp, 0.0) + cash
        if cash > 0.0:
            self._host_cash[host] = self._host_cash.get(host, 0.0) + cash
            self.risen.add(host)
            self._changed[fp] = host

    def take_changes(self) -> list[tuple[int, str, float]]:
        """(fp, host, cash) of the queued URLs credited since the last call (a URL
        leased since is left out: its kept cash stays until it is done)."""
        changed, self._changed = self._changed, {}
        cash = self._cash
        return [(fp, host, cash[fp]) for fp, host in changed.items() if fp in cash]

    def restore(self, rows: Iterable[tuple[int, str, float]]) -> None:
        """The cash a stopped crawl kept (importance_store.py), before any URL is queued."""
        for fp, host, cash in rows:
            self._credit(host, fp, cash)
        self._changed.clear()  # kept already

    def __len__(self) -> int:
        return len(self._cash)


def priority_options(config: CrawlConfig) -> dict[str, Any]:
    """The embedded frontier's options for ``config.priority``: importance order picks
    from a wider window of each host's queue (order within it is exact)."""
    if config.priority != "importance":
        return {}
    return {"importance": Importance(), "window": IMPORTANCE_WINDOW}
