"""Failures and back-off, seen from the server: retries, Retry-After, dead letters."""

from __future__ import annotations

from pathlib import Path

from tests.e2e.backends import CrawlBackend
from tests.e2e.scripted import Scripted, page, start_scripted
from tests.e2e.test_rules import ROBOTS, links

CLOCK_SLACK_S = 0.015


def arrivals(server: Scripted, path: str) -> list[float]:
    return sorted(e["t"] for e in server.log() if e["path"] == path)


def test_retries_back_off_and_dead_letters(crawl_backend: CrawlBackend, tmp_path: Path) -> None:
    script = {
        "0": {  # a host that asks to slow down, then recovers
            "/robots.txt": ROBOTS,
            "/": page(links("/busy", "/after")),
            "/busy": [
                page(status=503, **{"Retry-After": "1"}),
                page(status=429, **{"Retry-After": "1"}),
                page(links()),
            ],  # fmt: skip
            "/after": page(links()),
        },
        "1": {  # a host with broken pages
            "/robots.txt": ROBOTS,
            "/": page(links("/broken", "/missing", "/slow")),
            "/broken": page(status=500),
            "/slow": {"body": "late", "delay_s": 3},
        },
    }
    server = start_scripted(tmp_path, script)
    try:
        crawled = crawl_backend.crawl(
            [server.bases[0] + "/", server.bases[1] + "/"], "--scope", "any", "--delay", "0",
            "--timeout", "0.5", "--no-sitemaps",
        )  # fmt: skip
        assert crawled.returncode == 0, crawled.stderr
    finally:
        server.stop()
    rows = {r["url"].rsplit("/", 1)[1]: r for r in crawled.export()}
    # 503 then 429, each with Retry-After: 1 s, then 200: three attempts, a second apart.
    busy = arrivals(server, "/busy")
    assert len(busy) == 3
    assert all(b - a >= 1 - CLOCK_SLACK_S for a, b in zip(busy, busy[1:], strict=False))
    assert rows["busy"]["status"] == 200 and rows["busy"]["error"] is None
    # The whole host slowed down, not only the URL: /after waited out the Retry-After
    # too. Its good answer halved the back-off (1 s): no later gap is under 0.5 s
    # (test_backoff_recovery.py: from the very next request).
    host0 = sorted(e["t"] for e in server.log() if e["host"] == server.bases[0][7:])
    gaps = [b - a for a, b in zip(host0[2:], host0[3:], strict=False)]
    assert gaps[0] >= 1 - CLOCK_SLACK_S, (gaps, server.log())
    assert all(gap >= 0.5 - CLOCK_SLACK_S for gap in gaps), (gaps, server.log())
    # 500 three times, then dead-lettered; 404 once; a timeout retried, then failed.
    assert len(arrivals(server, "/broken")) == 3 and rows["broken"]["error"] == "http_500"
    assert len(arrivals(server, "/missing")) == 1 and rows["missing"]["error"] == "http_404"
    assert len(arrivals(server, "/slow")) == 3 and rows["slow"]["error"] == "timeout"
    stats = crawled.stats()
    assert stats["dead_letter"] == 1
    assert stats["counters"]["retried.http_503"] == 1 and stats["counters"]["retried.http_429"] == 1
    assert stats["fetch_attempts"]["retry"] == 2 + 2 + 2
