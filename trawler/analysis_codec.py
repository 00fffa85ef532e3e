"""What page analysis answers, and how a page and its answer cross to and from a
parser process.

A page goes as a tuple of the fields analysed (``page_item``) and comes back as
tuples (``flatten_analysis``, ``unflatten_analysis``): pickling dataclasses cost
the crawl process more than the parsing it saved (bench/RESULTS.md). A sitemap's
answer comes back the same way (``unflatten_sitemap``). Both sides are analysis.py's:
the parser process's functions and the pool in the crawl process.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field, fields
from operator import attrgetter

from trawler.outcome import Outcome
from trawler.records import CrawlRequest, Edge, FetchResult, PageRecord


@dataclass(slots=True)
class Analysis:
    outcome: Outcome  # the page row; outcome.links emptied (the requests below replace them)
    requests: list[CrawlRequest]  # followable links in scope, not traps; robots not yet checked
    rejected: dict[str, int]  # links left out, by reason
    # The page's canonical URL, normalised, when it is another URL than the page's
    # own (then ``duplicate_of`` too); the loop decides whether to crawl it.
    canonical_elsewhere: str | None = None
    edges: list[Edge] = field(default_factory=list)  # the page's links, the graph's (graph.py)
    anchors: list[str | None] = field(default_factory=list)  # of each request's link
    skipped: list[tuple[str, str, str | None]] = field(default_factory=list)  # LinkFilter's


@dataclass(slots=True)
class SitemapAnalysis:
    requests: list[CrawlRequest]  # child sitemaps and listed URLs; robots not yet checked
    listed: int  # entries the sitemap listed
    counters: Counter[str]  # sitemaps.* counters
    rejected: Counter[str]  # URLs left out, by reason
    skipped: list[tuple[str, str, str | None]] = field(default_factory=list)  # LinkFilter's


# What a parser process gets of a page: the fields page_outcome reads, as tuples (no
# dataclasses to pickle), the raw body left out (only the decoded one is parsed).
PageItem = tuple[tuple, tuple]


_REQUEST_FIELDS = tuple(f.name for f in fields(CrawlRequest))
_all_request_values = attrgetter(*_REQUEST_FIELDS)
_REVISIT_AT = _REQUEST_FIELDS.index("revisit")


def request_values(request: CrawlRequest) -> tuple:
    """Every field of a request, as a parser process gets it and sends it back, but
    its revisit state (the loop's, not the parser's): a field added to CrawlRequest
    travels without a change here (a list by hand once dropped <changefreq>)."""
    values = _all_request_values(request)
    if values[_REVISIT_AT] is None:
        return values
    return (*values[:_REVISIT_AT], None, *values[_REVISIT_AT + 1 :])


def page_item(request: CrawlRequest, result: FetchResult) -> PageItem:
    return (
        request_values(request),
        (result.url, result.final_url, result.status, result.headers, result.content_type,
         result.charset, result.body, result.started_at, result.duration_s, result.rendered,
         result.dom),
    )  # fmt: skip


def from_page_item(item: PageItem) -> tuple[CrawlRequest, FetchResult]:
    request, (url, final_url, status, headers, content_type, charset, body, at, took, rendered,
              dom) = item  # fmt: skip
    result = FetchResult(url, final_url, status, headers, content_type, charset, body,
                         started_at=at, duration_s=took, rendered=rendered, dom=dom)  # fmt: skip
    return CrawlRequest(*request), result


_PAGE_FIELDS = tuple(f.name for f in fields(PageRecord))
_page_values = attrgetter(*_PAGE_FIELDS)


def flatten_analysis(analysis: Analysis) -> tuple:
    requests = [(r.url, r.depth, r.parent_url, r.host, r.fp) for r in analysis.requests]
    page = _page_values(analysis.outcome.page)
    outcome = analysis.outcome
    return (page, outcome.redirect_to, requests, analysis.rejected,
            analysis.canonical_elsewhere, analysis.edges, analysis.anchors,
            analysis.skipped)  # fmt: skip


def unflatten_analysis(flat: tuple) -> Analysis:
    page_values, redirect_to, requests, rejected, elsewhere, edges, anchors, skipped = flat
    outcome = Outcome(PageRecord(*page_values), redirect_to=redirect_to)
    requests = [CrawlRequest(*r) for r in requests]
    return Analysis(outcome, requests, rejected, elsewhere, edges, anchors, skipped)


def unflatten_sitemap(flat: tuple) -> SitemapAnalysis:
    requests, listed, counters, rejected, skipped = flat
    found = [CrawlRequest(*r) for r in requests]
    return SitemapAnalysis(found, listed, Counter(counters), Counter(rejected), skipped)
