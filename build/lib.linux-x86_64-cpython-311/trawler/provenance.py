"""Provenance: why a URL was fetched or left out (issue 18), for ``trawler why`` and
the API's URL view. Pure: the crawl builds rows here, the stores keep them
(store/sqlite_provenance.py, store/pg_provenance.py), and ``describe`` words a
stored report.

A row is ``(url, parent_url, via, anchor, reason, detail)``: how the crawl found
the URL (``via``: a link of ``parent_url`` with that anchor text, a sitemap, a
redirect, a canonical URL) and, when it was left out, the reason code (the
``rejected.*`` / ``skipped.*`` counters' names) and the rule that decided it. One
row per URL, its first discovery: every page of a site links the same URLs,
and a row per link would grow without bound. Seeds, and sitemaps robots.txt
names, are known from the frontier (depth 0, no parent; a robots.txt parent)
and get a row only when they are skipped.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from trawler.records import CrawlRequest
from trawler.scope import TrapLimits

SEED, LINK, SITEMAP, REDIRECT, CANONICAL, ROBOTS_TXT = (
    "seed", "link", "sitemap", "redirect", "canonical", "robots.txt",
)  # fmt: skip
Row = tuple[str, str | None, str, str | None, str | None, str | None]
# (url, reason, anchor text, via) of a URL left out, before its row is made.
Skip = tuple[str, str, str | None, str]
Detail = Callable[[str, str], str | None]  # (reason, url) -> the rule, in words
SKIPS_KEPT_MAX = 1 << 16  # skipped URLs a job remembers having recorded (~6 MB)
_LIMITS = TrapLimits()
_TRAPS = {
    "url_too_long": f"URL longer than {_LIMITS.max_url_length} characters",
    "path_too_deep": f"more than {_LIMITS.max_path_depth} path segments",
    "repeated_segments": f"a path segment repeated more than {_LIMITS.max_repeated_segments}"
    " times in a row",
    "too_many_params": f"more than {_LIMITS.max_query_params} query parameters",
    "session_id": "a session id in the URL",
    "calendar": f"a calendar page more than {_LIMITS.max_calendar_years_ahead} years ahead",
}


def trap_rule(reason: str) -> str | None:
    """The trap rule behind a reason code, or None when the code is not a trap's."""
    return _TRAPS.get(reason)


def via_of(request: CrawlRequest) -> str:
    """How a URL leased from the frontier was found, from what the request carries."""
    return found_via(request.parent_url, request.kind)


def found_via(parent_url: str | None, kind: str) -> str:
    """How a URL was found, from its frontier entry alone (a link's redirect or
    canonical URL looks like a link there: only its row tells)."""
    if parent_url is None:
        return SEED
    if parent_url.endswith("/robots.txt"):
        return ROBOTS_TXT
    return SITEMAP if kind == "sitemap" else LINK


class SkipsKept:
    """The URLs whose skip a job has recorded lately: a link left out on every page
    of a site is written once, not once a page. Bounded: past the bound it starts
    over, and the store's first row per URL still holds."""

    __slots__ = ("_urls",)

    def __init__(self) -> None:
        self._urls: set[str] = set()

    def first(self, url: str) -> bool:
        urls = self._urls
        if url in urls:
            return False
        if len(urls) >= SKIPS_KEPT_MAX:
            urls.clear()
        urls.add(url)
        return True


@dataclass(slots=True)
class Found:
    """What one fetched page led to, gathered as its links go through the checks."""

    parent: str
    anchors: dict[str, str | None] = field(default_factory=dict)  # url -> its link's text
    via: dict[str, str] = field(default_factory=dict)  # url -> how, when not a link
    skips: list[Skip] = field(default_factory=list)

    def found(self, requests: list[CrawlRequest], via: str) -> None:
        for request in requests:
            self.via[request.url] = via

    def left_out(self, before: list[CrawlRequest], after: list[CrawlRequest], reason: str) -> None:
        """The requests of ``before`` not in ``after`` were left out for ``reason``."""
        if len(before) == len(after):
            return
        kept = {request.url for request in after}
        for request in before:
            if request.url not in kept:
                url = request.url
                self.skips.append((url, reason, self.anchors.get(url), self.via.get(url, LINK)))

    def rows(self, admitted: list[CrawlRequest], kept: SkipsKept, detail: Detail) -> list[Row]:
        """Rows of the URLs admitted, and of those left out not recorded lately;
        ``detail(reason, url)``: the rule that decided."""
        parent, anchors, via = self.parent, self.anchors, self.via
        rows: list[Row] = [
            (r.url, parent, via.get(r.url, LINK), anchors.get(r.url), None, None) for r in admitted
        ]
        for url, reason, anchor, how in self.skips:
            if kept.first(url):
                rows.append((url, parent, how, anchor, reason, detail(reason, url)))
        return rows


_VIA_WORDS = {
    SEED: "it is a seed of the crawl",
    SITEMAP: "it is listed in the sitemap {parent}",
    REDIRECT: "{parent} redirected to it",
    CANONICAL: "it is the canonical URL of {parent}",
    ROBOTS_TXT: "it is a sitemap named in {parent}",
}
_REASON_WORDS = {
    "out_of_scope": "out of scope",
    "robots": "disallowed by robots.txt",
    "robots_unavailable": "robots.txt could not be fetched",
    "max_depth": "deeper than the crawl's maximum depth",
    "host_budget": "its host had reached its page budget",
    "max_pages": "the crawl had reached its page budget",
    "blocklist": "its host is on the blocklist",
    "nofollow": "the link is rel=nofollow",
}


def describe(report: dict) -> list[str]:
    """``trawler why``'s lines for a provenance report (the stores' ``provenance``)."""
    url, parent, via = report["url"], report.get("parent_url"), report.get("found_via")
    lines = [f"{url}: {_decision(report)}"]
    if via == LINK:
        anchor = report.get("anchor")
        text = f' "{anchor}"' if anchor else " (no anchor text)"
        lines.append(f"found: a link{text} on {parent}")
    elif via in _VIA_WORDS:
        lines.append("found: " + _VIA_WORDS[via].format(parent=parent))
    reason = report.get("reason")
    if reason is not None:
        words = _REASON_WORDS.get(reason) or f"a crawler trap ({reason})"
        detail = report.get("detail")
        lines.append(f"reason: {words}" + (f": {detail}" if detail else ""))
    if report.get("depth") is not None:
        lines.append(f"depth: {report['depth']}")
    return lines


def _decision(report: dict) -> str:
    decision = report["decision"]
    if decision == "fetched":
        status = report.get("status")
        return "fetched" + (f" (HTTP {status})" if status is not None else "")
    if decision == "failed":
        return f"fetch failed ({report.get('error')})"
    return {"skipped": "skipped, not fetched", "queued": "queued, not fetched yet"}.get(
        decision, decision
    )
