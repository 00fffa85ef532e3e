"""What a fetch result means for its URL: the page row and the links to follow. Pure.

Errors are recorded as short codes on the page row (``dns``, ``timeout``,
``too_large``, ``http_404``, ``not_html``, ...); a bad page never raises.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field

from trawler.config import CrawlConfig
from trawler.minhash import fingerprints
from trawler.parse import parse_html, parse_x_robots_tag
from trawler.records import CrawlRequest, FetchResult, Link, PageRecord, RobotsRecord
from trawler.resolve import resolve_reference
from trawler.safetext import safe_url
from trawler.simhash import hex64, text_hash
from trawler.tdmrep import header_reservation, meta_reservation

HTML_TYPES = frozenset({"text/html", "application/xhtml+xml"})
# WHATWG MIME Sniffing §7.1: these (or no Content-Type at all) mean "sniff the body".
_UNKNOWN_TYPES = frozenset({None, "unknown/unknown", "application/unknown", "*/*"})
# WHATWG MIME Sniffing §7.1, the HTML rows of the "identifying an unknown MIME
# type" table: after leading whitespace, case-insensitive, then a space or ">".
_HTML_SIGNATURES = tuple(
    b"<" + tag
    for tag in b"!doctype html|html|head|script|iframe|h1|div|font|table|a|style|title|b|"
    b"body|br|p|!--".split(b"|")
)
_SNIFF_BYTES = 1445  # the spec's resource header length
REDIRECT_ELSEWHERE = "redirect"  # the engine's hop veto: target crawled on its own
# A download that succeeded but is not HTML (PDF, image): kept in the WARC, not parsed.
# Recorded in the page's error column for what it says about the row (no text, no
# links), but counted apart from errors: nothing went wrong.
NOT_HTML = "not_html"
# RFC 8288 link-value: <uri-reference> *( ";" link-param ); we want rel=canonical.
_LINK_VALUE = re.compile(r"<([^>]*)>\s*((?:;\s*[^;,]+)*)")
_REL_PARAM = re.compile(r"""\brel\s*=\s*(?:"([^"]*)"|([^\s;,"]+))""", re.IGNORECASE)


@dataclass(slots=True)
class Outcome:
    page: PageRecord
    links: list[Link] = field(default_factory=list)
    redirect_to: str | None = None  # a redirect target to crawl as its own URL
    # Every link of the page, followable or not (the link graph, graph.py); ``links``
    # is empty when the page says nofollow, this is not.
    found: list[Link] = field(default_factory=list)
    nofollow: bool = False  # the page's robots directives say nofollow


def page_outcome(
    request: CrawlRequest, result: FetchResult, config: CrawlConfig, agent_token: str
) -> Outcome:
    page = _base_record(request, result)
    outcome = Outcome(page)
    if result.error == REDIRECT_ELSEWHERE:
        # Not an error: this URL answered with a redirect that is crawled separately.
        page.status = result.redirects[-1].status if result.redirects else result.status
        outcome.redirect_to = result.final_url
        return outcome
    if result.error is not None:
        page.error = result.error
    elif result.status is None or not 200 <= result.status < 300:
        page.error = f"http_{result.status}"
    elif sniffed_type(result.content_type, result.body) not in HTML_TYPES:
        page.error = NOT_HTML  # recorded, stored in WARC, not parsed
    else:
        _add_parsed(outcome, result, config, agent_token)
    if result.status is not None:  # any answer may carry TDMRep headers (PDFs too)
        _add_reservation(page, result.headers)
    return outcome


def _add_reservation(page: PageRecord, headers: list[tuple[str, str]]) -> None:
    """The page's own TDMRep statement: its meta (set by ``_add_parsed``) first, then
    its response headers; the origin's tdmrep.json is the loop's (tdmgate.py)."""
    if page.tdm_source is None:
        stated = header_reservation(headers)
        page.tdm_reservation, page.tdm_policy, page.tdm_source = (
            stated.reserved,
            stated.policy,
            stated.source,
        )


def sniffed_type(content_type: str | None, body: bytes) -> str | None:
    """The media type to act on: ``content_type``, unless it is missing or unknown
    and the body starts like HTML (WHATWG MIME Sniffing §7.1), as browsers do."""
    if content_type not in _UNKNOWN_TYPES:
        return content_type
    head = body[:_SNIFF_BYTES].lstrip(b"\t\n\x0c\r ").lower()
    for signature in _HTML_SIGNATURES:
        if head.startswith(signature) and head[len(signature) : len(signature) + 1] in (b" ", b">"):
            return "text/html"
    return content_type


def _base_record(request: CrawlRequest, result: FetchResult) -> PageRecord:
    body = result.body
    return PageRecord(
        url=request.url,
        final_url=result.final_url,
        status=result.status,
        content_type=result.content_type,
        content_length=len(body),
        depth=request.depth,
        parent_url=request.parent_url,
        title=None,
        description=None,
        keywords=None,
        text=None,
        links_count=0,
        content_sha256=hashlib.sha256(body).hexdigest() if result.status is not None else None,
        fetched_at=result.started_at,
        fetch_duration_s=round(result.duration_s, 6),
        error=None,
        attempts=request.attempts + 1,
        host=request.host,
        sitemap_lastmod=request.lastmod,
        sitemap_changefreq=request.changefreq,
        kind=request.kind,
        rendered=result.rendered,
    )


def robots_record(result: FetchResult, host: str) -> RobotsRecord:
    """The stored row of one robots.txt download: its answer, whatever it was."""
    body = result.body
    return RobotsRecord(
        url=result.url,
        final_url=result.final_url,
        status=result.status,
        content_type=result.content_type,
        content_length=len(body),
        content_sha256=hashlib.sha256(body).hexdigest() if result.status is not None else None,
        fetched_at=result.started_at,
        fetch_duration_s=round(result.duration_s, 6),
        error=result.error,
        host=host,
    )


def _add_parsed(outcome: Outcome, result: FetchResult, config: CrawlConfig, token: str) -> None:
    # A rendered page is read from its DOM (serialised as UTF-8), what a user sees.
    body, charset = (result.body, result.charset) if result.dom is None else (result.dom, "utf-8")
    parsed = parse_html(body, result.final_url, charset, config.max_links_per_page, token)
    page = outcome.page
    if parsed.error is not None:  # not parsed: no text, no links to follow
        page.error = parsed.error
        return
    page.title, page.description, page.keywords = parsed.title, parsed.description, parsed.keywords
    page.text = parsed.text
    if parsed.main_text:  # content fingerprints, for duplicate detection (dedup.py)
        page.text_hash = text_hash(parsed.main_text, collapsed=True)  # parse.py's
        # Word 3-shingles, hashed once for both: the SimHash finds candidates, the
        # sketch confirms them. Pairs (the SimHash's shingles before the sketch) caught
        # more one-word edits within 3 bits, but candidates now come from up to 10 bits
        # (dedup.CANDIDATE_BITS), and one hashing pass instead of two saves ~30%.
        fingerprint, page.minhash = fingerprints(parsed.main_text)
        page.simhash = hex64(fingerprint)
    page.links_count = len(parsed.links)
    if parsed.tdm_reservation is not None:
        meta = meta_reservation(parsed.tdm_reservation, parsed.tdm_policy)
        page.tdm_reservation, page.tdm_policy, page.tdm_source = (
            meta.reserved,
            meta.policy,
            meta.source,
        )
    # The header is the site's HTTP-level statement; the <link> element wins if both exist.
    header_canonical = canonical_from_link_header(result.headers, result.final_url)
    page.canonical = parsed.canonical or header_canonical
    header_robots = [value for name, value in result.headers if name.lower() == "x-robots-tag"]
    directives = parsed.meta_robots | parse_x_robots_tag(header_robots, token)
    page.noindex = "noindex" in directives
    outcome.found = parsed.links
    outcome.nofollow = "nofollow" in directives
    if not outcome.nofollow:
        outcome.links = parsed.links


def canonical_from_link_header(headers: list[tuple[str, str]], base_url: str) -> str | None:
    """``Link: <https://example.com/a>; rel="canonical"`` (RFC 8288, RFC 6596)."""
    for name, value in headers:
        if name.lower() != "link":
            continue
        for match in _LINK_VALUE.finditer(value):
            rel = _REL_PARAM.search(match.group(2))
            if rel and "canonical" in (rel.group(1) or rel.group(2) or "").lower().split():
                # Header bytes that are not UTF-8 arrive as surrogates: encode them.
                return resolve_reference(base_url, safe_url(match.group(1)))
    return None
