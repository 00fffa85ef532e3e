"""What the analysis of a page gives is pinned: stored fingerprints never change.

SimHash, MinHash sketch, text hash and URL fingerprints are stored: the dedup
index and the URL-seen set of a resumed crawl compare new pages with them, so a
faster implementation must give the very same values. tests/data/analysis_golden.json
holds, for every page of test_analysis_same.py's sample (the generated web and the
hostile pages), the values the code computed before the parser's CPU work was cut
(issue 14): each fingerprint, and a digest of the whole Analysis (page row,
followable requests with their fingerprints, rejected links by reason).

Regenerate only for an intended change of results:
``.venv/bin/python -m tests.unit.test_analysis_golden > tests/data/analysis_golden.json``
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict
from pathlib import Path

import pytest

from tests.unit.test_analysis_same import HOST, Page, hostile_pages, site_pages
from trawler.analysis import Analysis, AnalysisPool, analyse, analyse_sitemap
from trawler.config import CrawlConfig

GOLDEN = Path(__file__).resolve().parent.parent / "data" / "analysis_golden.json"
CONFIGS = {
    "defaults": CrawlConfig(),
    "options": CrawlConfig(
        max_links_per_page=100,
        max_depth=2,
        robots_agent="otherbot",
        strip_params=["sort"],
        exclude=["/p/1"],
    ),  # fmt: skip
}


def _plain(value: object) -> object:
    if isinstance(value, bytes):
        return value.hex()
    if isinstance(value, frozenset | set):
        return sorted(value)
    return value


# Fields added to the records since the values were pinned (issues 15, 16, 18): left out of the
# digest while empty (None), so the pin still checks every value it checked.
ADDED_SINCE = frozenset({"revisit", "sitemap_changefreq", "changefreq", "rendered",
                         "tdm_reservation", "tdm_policy", "tdm_source", "ai_robots_groups",
                         "ai_robots_disallowed"})  # fmt: skip


# The same for a field whose empty value is not None: CrawlRequest.importance (the OPIC
# cash of --priority importance, 0.0 unless the frontier gave it some).
EMPTY_SINCE = {"importance": 0.0}


def _fields(record: object) -> dict[str, object]:
    return {k: _plain(v) for k, v in asdict(record).items()  # type: ignore[call-overload]
            if not (k in ADDED_SINCE and v is None)
            and not (k in EMPTY_SINCE and v == EMPTY_SINCE[k])}  # fmt: skip


def summary(analysis: Analysis) -> dict[str, object]:
    """The fingerprints by name, and a digest of everything the analysis says."""
    page = analysis.outcome.page
    whole = {
        "page": _fields(page),
        "redirect_to": analysis.outcome.redirect_to,
        "requests": [_fields(r) for r in analysis.requests],
        "rejected": sorted(analysis.rejected.items()),
        "canonical_elsewhere": analysis.canonical_elsewhere,
    }
    text = json.dumps(whole, sort_keys=True, ensure_ascii=True)
    return {
        "simhash": page.simhash,
        "minhash": page.minhash.hex() if page.minhash is not None else None,
        "text_hash": page.text_hash,
        "fps": [r.fp for r in analysis.requests[:5]],
        "requests": len(analysis.requests),
        "digest": hashlib.sha256(text.encode()).hexdigest(),
    }


def sitemap_summary(pool: AnalysisPool, page: Page) -> dict[str, object]:
    found = analyse_sitemap(pool.analyser, *page)
    requests = [_fields(r) for r in found.requests]
    text = json.dumps([requests, found.listed, sorted(found.rejected.items())], sort_keys=True)
    return {"fps": [r.fp for r in found.requests[:5]], "requests": len(requests),
            "digest": hashlib.sha256(text.encode()).hexdigest()}  # fmt: skip


def summaries(config: CrawlConfig) -> dict[str, dict[str, object]]:
    """Each page analysed twice in a row: a second sight of the same links (as on the
    next page of a site) must give what the first did."""
    pool = AnalysisPool(config, 0)
    pool.start([HOST, "127.0.1.1:8800", "127.0.1.2:8800"])
    out: dict[str, dict[str, object]] = {}
    pages = site_pages() + hostile_pages()
    for round_ in range(2):
        for request, result in pages:
            key = f"{request.url} {request.kind}"
            got = summary(analyse(pool.analyser, request, result))
            if round_:
                assert got == out[key], f"second sight of {key}"
            out[key] = got
            if request.kind == "sitemap":
                out[key + " links"] = sitemap_summary(pool, (request, result))
    return out


def golden() -> dict[str, dict[str, dict[str, object]]]:
    return {name: summaries(config) for name, config in CONFIGS.items()}


@pytest.mark.timeout(120)
@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_analysis_equals_the_pinned_values(name: str) -> None:
    want = json.loads(GOLDEN.read_text())[name]
    have = summaries(CONFIGS[name])
    assert sorted(have) == sorted(want)
    assert sum(1 for s in want.values() if s.get("simhash")) > 20  # the sample has texts
    for key in want:
        assert have[key] == want[key], key


if __name__ == "__main__":
    print(json.dumps(golden(), indent=1, sort_keys=True))
