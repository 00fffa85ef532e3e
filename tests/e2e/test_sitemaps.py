"""Sitemaps in a crawl: robots.txt Sitemap lines, indexes, /sitemap.xml, and their limits."""

from __future__ import annotations

from pathlib import Path

from tests.e2e.backends import CrawlBackend
from tests.e2e.scripted import page, start_scripted
from tests.e2e.test_rules import links

XML = {"Content-Type": "application/xml"}
NS = 'xmlns="http://www.sitemaps.org/schemas/sitemap/0.9"'


def urlset(*entries: str) -> str:
    return f"<urlset {NS}>{''.join(entries)}</urlset>"


def test_sitemaps_from_robots_and_index(crawl_backend: CrawlBackend, tmp_path: Path) -> None:
    base = "http://127.0.9.1:{port}"
    script = {
        "0": {
            "/robots.txt": page(
                f"User-agent: *\nDisallow: /private/\nSitemap: {base}/index.xml\n",
                **{"Content-Type": "text/plain"},
            ),  # fmt: skip
            "/": page(links("/linked")),
            "/linked": page(links()),
            "/index.xml": page(
                f"<sitemapindex {NS}><sitemap><loc>{base}/sm/one.xml</loc>"
                "</sitemap></sitemapindex>",
                **XML,
            ),  # fmt: skip
            "/sm/one.xml": page(
                urlset(
                    f"<url><loc>{base}/only-in-sitemap</loc><lastmod>2026-01-02</lastmod></url>",
                    f"<url><loc>{base}/private/hidden</loc></url>",
                    f"<url><loc>{base}/linked</loc></url>",
                    "<url><loc>http://127.0.9.2:1/elsewhere</loc></url>",
                ),
                **XML,
            ),  # fmt: skip
            "/only-in-sitemap": page(links()),
        }
    }
    server = start_scripted(tmp_path, script)
    try:
        crawled = crawl_backend.crawl([server.bases[0] + "/"], "--delay", "0", "--max-depth", "1")
        assert crawled.returncode == 0, crawled.stderr
    finally:
        server.stop()
    fetched = server.paths()
    assert fetched.count("/only-in-sitemap") == 1 and fetched.count("/linked") == 1
    assert "/private/hidden" not in fetched and "/sitemap.xml" not in fetched
    rows = {r["url"].rsplit("/", 1)[1]: r for r in crawled.export()}
    assert rows["only-in-sitemap"]["sitemap_lastmod"] == "2026-01-02"
    assert rows["only-in-sitemap"]["depth"] == 1
    assert rows["one.xml"]["error"] is None and rows["one.xml"]["links_count"] == 4
    stats = crawled.stats()
    assert stats["counters"]["sitemaps.fetched"] == 2
    assert stats["counters"]["sitemaps.rejected_location"] == 1


def test_default_sitemap_xml_and_no_sitemaps(crawl_backend: CrawlBackend, tmp_path: Path) -> None:
    script = {"0": {"/": page(links()), "/sitemap.xml": page(urlset(
        "<url><loc>http://127.0.9.1:{port}/from-default</loc></url>"), **XML),
        "/from-default": page(links())}}  # fmt: skip
    server = start_scripted(tmp_path, script)
    try:
        for flag, expected in (("--sitemaps", True), ("--no-sitemaps", False)):
            crawled = crawl_backend.crawl([server.bases[0] + "/"], "--delay", "0", flag)
            assert crawled.returncode == 0, crawled.stderr
            urls = {r["url"].rsplit("/", 1)[1] for r in crawled.export()}
            assert ("from-default" in urls) is expected
    finally:
        server.stop()
