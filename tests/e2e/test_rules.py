"""Page-level rules, canonical links, traps and budgets, seen from the server."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.e2e.backends import CrawlBackend, Crawled
from tests.e2e.conftest import run_trawler
from tests.e2e.scripted import Scripted, page, start_scripted

ROBOTS = page("User-agent: *\nDisallow: /private/\n", **{"Content-Type": "text/plain"})


def links(*hrefs: str, head: str = "") -> str:
    anchors = "".join(f'<a href="{h}">{h}</a> ' for h in hrefs)
    return f"<html><head><title>t</title>{head}</head><body>{anchors}</body></html>"


def crawl(backend: CrawlBackend, server: Scripted, *args: str) -> tuple[Crawled, dict]:
    """The crawl, and its rows by path with noindex pages left out."""
    crawled = backend.crawl([server.bases[0] + "/"], "--delay", "0", "--no-sitemaps", *args)
    assert crawled.returncode == 0, crawled.stderr
    rows = crawled.export(include_noindex=False)
    return crawled, {by_path(row): row for row in rows}


def by_path(row: dict) -> str:
    return row["url"].split(":", 2)[2].split("/", 1)[1]


@pytest.fixture
def rules_site(tmp_path: Path):
    home = links("/meta-nofollow", "/meta-noindex", "/x-robots", "/own-meta", "/other-meta",
                 "/canon-a", "/canon-header", "/a/b/a/b/a/b/a/b/a/b", "/shop?jsessionid=1",
                 "/cal/2099/01/01/", "/" + "x" * 2100, "/private/p")  # fmt: skip
    script = {"0": {
        "/robots.txt": ROBOTS,
        "/": page(home),
        "/meta-nofollow": page(links("/never-1", head='<meta name="robots" content="nofollow">')),
        "/meta-noindex": page(links("/via-noindex", head='<meta name="robots" content="noindex">')),
        "/via-noindex": page(links()),
        "/x-robots": page(links("/never-2"), **{"X-Robots-Tag": "noindex, nofollow"}),
        "/own-meta": page(links("/never-3", head='<meta name="trawler" content="none">')),
        "/other-meta": page(links("/via-other", head='<meta name="otherbot" content="nofollow">')),
        "/via-other": page(links()),
        "/canon-a": page(links(head='<link rel="canonical" href="/canon-b">')),
        "/canon-header": page(links(), Link='</canon-c>; rel="canonical"'),
        "/canon-b": page(links()),
        "/canon-c": page(links()),
    }}  # fmt: skip
    server = start_scripted(tmp_path, script)
    yield server
    server.stop()


def test_meta_robots_and_x_robots_tag(crawl_backend: CrawlBackend, rules_site: Scripted) -> None:
    crawled, rows = crawl(crawl_backend, rules_site)
    fetched = rules_site.paths()
    for never in ("/never-1", "/never-2", "/never-3", "/private/p"):
        assert never not in fetched
    assert "/via-noindex" in fetched and "/via-other" in fetched  # noindex still follows
    assert "meta-noindex" not in rows and "x-robots" not in rows and "own-meta" not in rows
    everything = {by_path(r): r for r in crawled.export()}
    assert everything["meta-noindex"]["noindex"] is True
    assert everything["meta-nofollow"]["noindex"] is False


def test_canonical_marks_duplicate_and_enqueues_target(
    crawl_backend: CrawlBackend, rules_site: Scripted
) -> None:
    _, rows = crawl(crawl_backend, rules_site)
    assert rows["canon-a"]["duplicate_of"] == rules_site.bases[0] + "/canon-b"
    assert rows["canon-header"]["duplicate_of"] == rules_site.bases[0] + "/canon-c"
    assert rows["canon-b"]["duplicate_of"] is None  # crawled although no page links to it
    assert "canon-c" in rows


def test_traps_rejected_and_counted(crawl_backend: CrawlBackend, rules_site: Scripted) -> None:
    crawled, _ = crawl(crawl_backend, rules_site)
    fetched = set(rules_site.paths())
    assert not any(p.startswith(("/a/b", "/shop", "/cal/", "/xxx")) for p in fetched)
    stats = crawled.stats()
    for reason in ("repeated_segments", "session_id", "calendar", "url_too_long", "robots"):
        assert stats["counters"][f"rejected.{reason}"] >= 1, reason


def test_max_pages_per_host(crawl_backend: CrawlBackend, rules_site: Scripted) -> None:
    crawled, _ = crawl(crawl_backend, rules_site, "--max-pages-per-host", "4")
    fetched = len([p for p in rules_site.paths() if p != "/robots.txt"])
    assert fetched == 4  # distributed: over all its workers (frontier/redis_budget.py)
    assert crawled.stats()["counters"]["rejected.host_budget"] > 0


# Not a crawl: `trawler robots` reads one robots.txt.
def test_robots_command_explains_verdict(rules_site: Scripted) -> None:
    url = rules_site.bases[0] + "/private/p"
    out = run_trawler("robots", url, "--allow-private", "--json")
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    assert report["allowed"] is False
    assert report["rule"] == "Disallow: /private/" and report["line"] == 2
    text = run_trawler("robots", rules_site.bases[0] + "/ok", "--allow-private").stdout
    assert text.startswith("ALLOWED") and "no rule matched" in text
