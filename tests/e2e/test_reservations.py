"""Reuse reservations (issue 18), seen from the exports of a crawl of a scripted site:
each page's TDMRep statement from its headers, its meta or its origin's tdmrep.json,
and its host's robots.txt groups for AI crawlers; embedded and distributed."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.backends import CrawlBackend, Crawled
from tests.e2e.scripted import Scripted, page, start_scripted

POLICY = "https://rights.example/policy.json"
TDMREP = [
    {"location": "/file/*", "tdm-reservation": 1, "tdm-policy": POLICY},
    {"location": "/open/*", "tdm-reservation": 0},
]
ROBOTS = (
    "User-agent: *\nAllow: /\n\n"
    "User-agent: GPTBot\nDisallow: /\n\n"
    "User-agent: CCBot\nDisallow: /private\n"
)
LINKS = ["/header", "/meta", "/file/a", "/file/meta0", "/open/b", "/none"]
HOME = "<html><body>" + "".join(f'<a href="{p}">{p}</a> ' for p in LINKS) + "</body></html>"
META = (
    '<html><head><meta name="tdm-reservation" content="{0}">'
    '<meta name="tdm-policy" content="{1}"></head><body>m</body></html>'
)
DELAY_S = 0.4
JSON = {"Content-Type": "application/json"}

# path -> (tdm_reservation, tdm_policy, tdm_source)
EXPECTED = {
    "/": (None, None, None),  # no rule for "/" in the file
    "/header": (True, POLICY, "header"),
    "/meta": (True, POLICY, "meta"),
    "/file/a": (True, POLICY, "tdmrep.json"),
    "/file/meta0": (False, None, "meta"),  # the page's own statement over its origin's
    "/open/b": (False, None, "tdmrep.json"),
    "/none": (None, None, None),
}


@pytest.fixture
def site(tmp_path: Path) -> Iterator[Scripted]:
    text = {"Content-Type": "text/plain"}
    script = {
        "0": {
            "/robots.txt": page(ROBOTS, **text),
            "/.well-known/tdmrep.json": page(json.dumps(TDMREP), **JSON),
            "/": page(HOME),
            "/header": page("<p>h</p>", **{"TDM-Reservation": "1", "TDM-Policy": POLICY}),
            "/meta": page(META.format(1, POLICY)),
            "/file/a": page("<p>a</p>"),
            "/file/meta0": page(META.format(0, "")),
            "/open/b": page("<p>b</p>"),
            "/none": page("<p>n</p>"),
        },
        # No robots.txt (404), a tdmrep.json that is not JSON: taken as no file.
        "1": {"/": page('<a href="/x">x</a>'), "/x": page("<p>x</p>"),
              "/.well-known/tdmrep.json": page("[{broken", **text)},
    }  # fmt: skip
    server = start_scripted(tmp_path, script)
    yield server
    server.stop()


def crawl(backend: CrawlBackend, site: Scripted, *args: str) -> Crawled:
    seeds = [base + "/" for base in site.bases]
    crawled = backend.crawl(seeds, "--delay", str(DELAY_S), "--no-sitemaps", *args)
    assert crawled.returncode == 0, crawled.stderr
    return crawled


def by_path(rows: list[dict], base: str) -> dict[str, dict]:
    return {r["url"].removeprefix(base): r for r in rows if r["url"].startswith(base + "/")}


def test_each_page_gets_its_reservation_and_its_hosts_ai_groups(
    crawl_backend: CrawlBackend, site: Scripted
) -> None:
    forget_shared_answers(crawl_backend, site)
    crawled = crawl(crawl_backend, site, "--tdmrep")
    rows = crawled.export()
    first = by_path(rows, site.bases[0])
    assert set(first) == set(EXPECTED)
    for path, expected in EXPECTED.items():
        row = first[path]
        assert (row["tdm_reservation"], row["tdm_policy"], row["tdm_source"]) == expected, path
        assert row["ai_robots_groups"] == "GPTBot,CCBot", path  # "*" is no AI crawler's group
        assert row["ai_robots_disallowed"] == "GPTBot", path  # CCBot only off /private
    second = by_path(rows, site.bases[1])
    assert set(second) == {"/", "/x"}
    for row in second.values():  # no robots.txt: no groups known; a malformed file: none
        assert [row[k] for k in ("tdm_reservation", "tdm_source", "ai_robots_groups")] == [
            None, None, None
        ]  # fmt: skip
    # Once per origin, however many workers: the fetch is shared like robots.txt's.
    for host in (0, 1):
        assert site.paths(host).count("/.well-known/tdmrep.json") == 1
    warnings = crawled.stderr.count("tdmrep.json is malformed, taken as no file")
    assert 1 <= warnings <= (1 if crawl_backend.name == "embedded" else 2)  # once a process
    table = list(csv.DictReader(io.StringIO(crawled.export_text("--format", "csv"))))
    header = {r["url"].removeprefix(site.bases[0]): r for r in table}["/header"]
    assert (header["tdm_reservation"], header["tdm_source"]) == ("True", "header")


def test_without_the_option_no_file_is_asked_for(
    crawl_backend: CrawlBackend, site: Scripted
) -> None:
    forget_shared_answers(crawl_backend, site)
    rows = by_path(crawl(crawl_backend, site).export(), site.bases[0])
    assert "/.well-known/tdmrep.json" not in site.paths(0) + site.paths(1)
    assert rows["/file/a"]["tdm_source"] is None  # only the file said anything of it
    assert rows["/header"]["tdm_source"] == "header" and rows["/meta"]["tdm_source"] == "meta"
    assert rows["/"]["ai_robots_disallowed"] == "GPTBot"


def spacing(site: Scripted, host: int) -> list[tuple[str, float]]:
    """Each request to ``host`` after the first: its path and the gap before it (s)."""
    netloc = site.bases[host].removeprefix("http://")
    entries = [e for e in site.log() if e["host"] == netloc]
    return [(b["path"], b["t"] - a["t"]) for a, b in zip(entries, entries[1:], strict=False)]


# Embedded: the server's log read for one crawl's spacing, then the same check failing.
def test_the_file_is_fetched_within_the_hosts_delay(site: Scripted, tmp_path: Path) -> None:
    from tests.e2e.backends import EmbeddedCrawls

    backend = EmbeddedCrawls(tmp_path)
    crawl(backend, site, "--tdmrep")
    gaps = spacing(site, 0)
    assert [path for path, _ in gaps][:1] == ["/.well-known/tdmrep.json"]  # after robots.txt
    assert min(gap for _, gap in gaps) >= DELAY_S, gaps
    # The check can fail: the same crawl at --delay 0 puts requests closer than that.
    site.log_path.write_text("")
    backend.crawl([site.bases[0] + "/"], "--delay", "0", "--no-sitemaps", "--tdmrep")
    assert min(gap for _, gap in spacing(site, 0)) < DELAY_S


def forget_shared_answers(backend: CrawlBackend, site: Scripted) -> None:
    """robots.txt and tdmrep.json answers are shared by every job through Redis, by
    origin: an earlier test's site on the same port would answer from there."""
    redis_url = getattr(backend, "redis_url", None)
    if redis_url is None:
        return
    import redis

    client = redis.Redis.from_url(redis_url)
    try:
        for base in site.bases:
            keys = list(client.scan_iter(match=f"trawler:robots:*{base}*", count=1000))
            if keys:
                client.delete(*keys)
    finally:
        client.close()


# Embedded: the file kept in the data directory across a stop, as robots.txt is.
def test_a_resumed_crawl_keeps_the_file_it_read(site: Scripted, tmp_path: Path) -> None:
    import signal
    import subprocess
    import sys
    import time

    from tests.e2e.conftest import export_rows, run_trawler

    data = tmp_path / "data"
    cmd = [sys.executable, "-m", "trawler", "crawl", site.bases[0] + "/", "--data", str(data),
           "--allow-private", "-q", "--no-sitemaps", "--delay", "1", "--tdmrep"]  # fmt: skip
    crawler = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 30
    while "/" not in site.paths(0) and time.monotonic() < deadline:  # the file, then "/"
        time.sleep(0.02)
    crawler.send_signal(signal.SIGTERM)  # a clean stop: what it read is committed
    crawler.wait(30)
    assert "/file/a" not in site.paths(0)  # stopped before the file's pages
    out = run_trawler("crawl", "--data", str(data), "-q")
    assert out.returncode == 0, out.stderr
    assert site.paths(0).count("/.well-known/tdmrep.json") == 1
    assert site.paths(0).count("/robots.txt") == 1
    rows = by_path(export_rows(data), site.bases[0])
    assert rows["/file/a"]["tdm_source"] == "tdmrep.json"  # read from the kept copy
