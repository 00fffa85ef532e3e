"""After a 503 the host backs off, and the first good answer lets it recover: the
next request comes at the recovered interval (retry.py: the back-off halves at each
good answer), not at the one the 503 set. Read from the server's log."""

from __future__ import annotations

from pathlib import Path

from tests.e2e.backends import CrawlBackend
from tests.e2e.scripted import page, start_scripted
from tests.e2e.test_backoff import CLOCK_SLACK_S
from tests.e2e.test_rules import ROBOTS, links

DELAY_S = 0.5
BACKOFF_S = 1.0  # retry.BACKOFF_INITIAL_S: a 503 without Retry-After


def test_first_good_answer_ends_the_back_off(crawl_backend: CrawlBackend, tmp_path: Path) -> None:
    script = {"0": {
        "/robots.txt": ROBOTS,
        "/": page(links("/busy", "/p1", "/p2", "/p3")),
        "/busy": [page(status=503), page(links())],
        **{f"/p{i}": page(links()) for i in (1, 2, 3)},
    }}  # fmt: skip
    server = start_scripted(tmp_path, script)
    try:
        crawled = crawl_backend.crawl([server.bases[0] + "/"], "--delay", str(DELAY_S),
                                      "--no-sitemaps")  # fmt: skip
        assert crawled.returncode == 0, crawled.stderr
    finally:
        server.stop()
    log = sorted(server.log(), key=lambda e: e["t"])
    times = [e["t"] for e in log]
    gaps = [round(b - a, 3) for a, b in zip(times, times[1:], strict=False)]
    busy = next(i for i, e in enumerate(log) if e["path"] == "/busy")
    # The request after the 503 waits out the back-off: delay + 1 s.
    assert gaps[busy] >= DELAY_S + BACKOFF_S - CLOCK_SLACK_S, gaps
    # It is answered well: the back-off halves, and the next request is that much sooner.
    recovered = DELAY_S + BACKOFF_S / 2
    assert recovered - CLOCK_SLACK_S <= gaps[busy + 1] < DELAY_S + BACKOFF_S - 0.2, gaps
