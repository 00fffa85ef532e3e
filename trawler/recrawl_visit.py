"""What one revisit found: pure functions from the page's revisit state and the
fetch result to a verdict (not modified, unchanged, changed, failed).

A change is an exact one: the SHA-256 of the decoded body differs from the latest
version's. The near-duplicate distance (SimHash bits of the main text, as the crawl
computes it, outcome.py) is recorded beside it, so a reader can tell a changed
timestamp from a rewritten page; it does not decide what is stored.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from trawler.minhash import SHINGLE_WORDS  # as the crawl's SimHash (outcome.py)
from trawler.parse import parse_html
from trawler.records import FetchResult
from trawler.simhash import distinct_shingle_hashes, hamming, hex64, simhash_of_hashes, words
from trawler.store.versions import RevisitState

NOT_MODIFIED, UNCHANGED, CHANGED, FAILED = "not_modified", "unchanged", "changed", "failed"


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
    if result.error is not None or result.status is None:
        return Judgement(FAILED)
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
        shingles = distinct_shingle_hashes(words(parsed.main_text), SHINGLE_WORDS)
        judgement.simhash = hex64(simhash_of_hashes(shingles))
