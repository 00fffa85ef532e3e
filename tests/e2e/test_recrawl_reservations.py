"""A revisit refills a page's reuse reservation (issue 18): a loopback site whose
TDMRep headers and meta change between the crawl and a recrawl pass; the export
after the pass says what the pages say now. Embedded and distributed."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from tests.e2e.backends import CrawlBackend, DistributedCrawls, _wait_bounded
from tests.e2e.conftest import run_trawler

POLICY = "https://rights.example/policy"
META = '<html><head><meta name="tdm-reservation" content="{}"></head><body>{}</body></html>'
HOME = "".join(f'<a href="/{p}">{p}</a> ' for p in "abcd")
# path -> (headers, body) at the crawl, then at the recrawl
BEFORE = {
    "/a": ({"TDM-Reservation": "1", "TDM-Policy": POLICY}, "<p>a</p>"),  # header dropped
    "/b": ({}, "<p>b</p>"),  # header added
    "/c": ({}, META.format(1, "c")),  # its meta turns to 0: a changed body
    "/d": ({}, META.format(1, "d")),  # a header of 0 added: its own meta still wins
}
AFTER = {
    "/a": ({}, "<p>a</p>"),
    "/b": ({"TDM-Reservation": "1", "TDM-Policy": POLICY}, "<p>b</p>"),
    "/c": ({}, META.format(0, "c, edited")),
    "/d": ({"TDM-Reservation": "0"}, META.format(1, "d")),
}
EXPECTED_BEFORE = {"/a": (True, "header"), "/b": (None, None), "/c": (True, "meta"),
                   "/d": (True, "meta")}  # fmt: skip
EXPECTED_AFTER = {"/a": (None, None), "/b": (True, "header"), "/c": (False, "meta"),
                  "/d": (True, "meta")}  # fmt: skip


class Site:
    """Pages served from ``pages``, switched by the test between visits."""

    def __init__(self) -> None:
        self.pages = dict(BEFORE)
        site = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 (http.server's name)
                if self.path == "/":
                    headers, body = {}, HOME
                elif self.path in site.pages:
                    headers, body = site.pages[self.path]
                else:
                    self.send_error(404)
                    return
                data = body.encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/html; charset=utf-8")
                self.send_header("Content-Length", str(len(data)))
                for name, value in headers.items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.base = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()


@pytest.fixture
def site() -> Iterator[Site]:
    served = Site()
    yield served
    served.server.shutdown()
    served.server.server_close()


def reservations(rows: list[dict], base: str) -> dict[str, tuple]:
    found = {r["url"].removeprefix(base): r for r in rows}
    return {path: (found[path]["tdm_reservation"], found[path]["tdm_source"]) for path in BEFORE}


def test_a_revisit_refills_the_pages_reservation(
    crawl_backend: CrawlBackend, site: Site, tmp_path: Path
) -> None:
    crawled = crawl_backend.crawl([site.base + "/"], "--delay", "0", "--no-sitemaps")
    assert crawled.returncode == 0, crawled.stderr
    assert reservations(crawled.export(), site.base) == EXPECTED_BEFORE
    site.pages = dict(AFTER)
    if isinstance(crawl_backend, DistributedCrawls):  # a pass the workers carry out
        out = run_trawler("recrawl", *crawled.stats_source, "--revisit-min", "1",
                          "--revisit-max", "20")  # fmt: skip
        assert out.returncode == 0, out.stderr
        logs = [tmp_path / f"recrawl-{i}.log" for i in range(2)]
        started = [crawl_backend._start_worker(crawled.warc_dir, log) for log in logs]
        assert _wait_bounded(started, 90) == 0
    else:
        out = run_trawler("recrawl", *crawled.source, "--delay", "0")
        assert out.returncode == 0, out.stderr
    assert reservations(crawled.export(), site.base) == EXPECTED_AFTER
