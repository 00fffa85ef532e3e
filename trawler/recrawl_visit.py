"""What one revisit found: pure functions from the page's revisit state and the
fetch result to a verdict (not modified, unchanged, changed, gone, redirected, failed).

A change is an exact one: the SHA-256 of the decoded body differs from the latest
version's. The near-duplicate distance (SimHash bits of the main text, as the crawl
computes it, outcome.py) is recorded beside it, so a reader can tell a changed
timestamp from a rewritten page; it does not decide what is stored.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

from trawler.minhash import SHINGLE_WORDS  # as the crawl's SimHash (outcome.py)
from trawler.outcome import REDIRECT_ELSEWHERE
from trawler.parse import parse_html
from trawler.records import CrawlRequest, FetchResult
from trawler.simhash import hamming, hex64, simhash
from trawler.store.versions import RevisitState

NOT_MODIFIED, UNCHANGED, CHANGED, FAILED = "not_modified", "unchanged", "changed", "failed"
GONE, REDIRECTED = "gone", "redirected"
# RFC 9110 §15.5.5, §15.5.11: the page is not there (410: on purpose, for good).
GONE_STATUSES = frozenset({404, 410})
# Verdicts that say nothing about how often the content changes (recrawl.py's estimator).
NO_EVIDENCE = frozenset({FAILED, GONE, REDIRECTED})


@dataclass(slots=True)
class Judgement:
    """A revisit's verdict and, for a 2xx, the new content's fingerprints."""

    verdict: str
    content_sha256: str | None = None
    simhash: str | None = None
    distance: int | None = None
    title: str | None = None
    text: str | None = None
    etag: str | None = None
    last_modified: str | None = None


@dataclass(slots=True)
class RevisitOutcome:
    """One revisit as a commit makes it durable (store/base.py ``CommitBatch.revisits``):
    a visit with its verdict, or (``judgement`` None) a page not fetched now, asked
    again at ``defer_to`` (wall clock); and the new URLs found from it."""

    request: CrawlRequest
    state: RevisitState
    result: FetchResult | None = None
    judgement: Judgement | None = None
    defer_to: float | None = None
    reason: str | None = None  # why it was not fetched (robots, blocklist, ...)
    warc_place: tuple[str | None, int | None] = (None, None)  # of its records, once written
    discovered: list[CrawlRequest] = field(default_factory=list)
    # The page's reuse reservation now (tdmrefresh.py FIELDS); None: left as stored.
    reservation: tuple | None = None
    keeps_meta: bool = False  # the body was not read again: a stored meta statement stays


def validators(headers: list[tuple[str, str]]) -> tuple[str | None, str | None]:
    """(ETag, Last-Modified) of a response (RFC 9110 §8.8), the first of each."""
    etag = last_modified = None
    for name, value in headers:
        lower = name.lower()
        if lower == "etag" and etag is None:
            etag = value.strip()
        elif lower == "last-modified" and last_modified is None:
            last_modified = value.strip()
    return etag, last_modified


def conditional_headers(state: RevisitState) -> tuple[tuple[str, str], ...]:
    """RFC 9110 §13.1: If-None-Match with the ETag; If-Modified-Since with the
    Last-Modified date (a server evaluates it only without If-None-Match, §13.2.2)."""
    headers: list[tuple[str, str]] = []
    if state.etag:
        headers.append(("If-None-Match", state.etag))
    if state.last_modified:
        headers.append(("If-Modified-Since", state.last_modified))
    return tuple(headers)


def judge(state: RevisitState, result: FetchResult) -> Judgement:
    if result.error == REDIRECT_ELSEWHERE:  # its target goes to the frontier (discovery.py)
        return Judgement(REDIRECTED)
    if result.error is not None or result.status is None:
        return Judgement(FAILED)
    if result.status in GONE_STATUSES:
        return Judgement(GONE)
    etag, last_modified = validators(result.headers)
    if result.status == 304:  # RFC 9110 §15.4.5: the stored version is current
        return Judgement(NOT_MODIFIED, state.content_sha256, state.simhash, 0,
                         etag=etag or state.etag,
                         last_modified=last_modified or state.last_modified)  # fmt: skip
    if not 200 <= result.status < 300:
        return Judgement(FAILED)
    sha = hashlib.sha256(result.body).hexdigest()
    if sha == state.content_sha256:
        return Judgement(UNCHANGED, sha, state.simhash, 0, etag=etag, last_modified=last_modified)
    judgement = Judgement(CHANGED, sha, etag=etag, last_modified=last_modified)
    _fingerprint(judgement, result)
    if judgement.simhash is not None and state.simhash is not None:
        judgement.distance = hamming(int(judgement.simhash, 16), int(state.simhash, 16))
    return judgement


def _fingerprint(judgement: Judgement, result: FetchResult) -> None:
    """Title, text and SimHash of an HTML body (none for other types)."""
    if result.content_type not in ("text/html", "application/xhtml+xml"):
        return
    parsed = parse_html(result.body, result.final_url, result.charset)
    if parsed.error is not None:
        return
    judgement.title, judgement.text = parsed.title, parsed.text
    if parsed.main_text:
        judgement.simhash = hex64(simhash(parsed.main_text, SHINGLE_WORDS))
