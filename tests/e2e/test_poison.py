"""End-to-end: bytes that are not text, sent by a server, never stop a crawl.

An old server answers ``Location: /caf\\xe9.html`` (Latin-1, not UTF-8). aiohttp
decodes that byte to a lone surrogate; before trawler/safetext.py it reached
the WARC writer, the commit failed with UnicodeEncodeError, and every resume
failed the same way. Now the target is percent-encoded as browsers do
(``/caf%E9.html``), the WARC keeps the header bytes exactly as sent, and every
URL ends with a page row.
"""

from __future__ import annotations

import gzip
from pathlib import Path

from warcio.archiveiterator import ArchiveIterator

from tests.e2e.backends import CrawlBackend, Crawled
from tests.e2e.conftest import export_rows, run_trawler
from tests.e2e.raw_server import RawServer

HOME = (
    b"HTTP/1.1 302 Found\r\nLocation: /caf\xe9.html\r\nX-Note: \xff\xfe\r\n"
    b"Content-Length: 0\r\nConnection: close\r\n\r\n"
)
CAFE_HEAD = (
    b"HTTP/1.1 200 OK\r\nContent-Type: text/html; charset=\xe9\r\n"
    b'Link: </b\xfcro>; rel="canonical"\r\nX-Robots-Tag: \xe9, nofollow\r\nConnection: close\r\n'
)
CAFE = CAFE_HEAD + b"\r\n<title>caf\xe9</title><a href='/menu\xe9'>menu</a>"
PAGE = b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nConnection: close\r\n\r\n<title>menu</title>"
NOT_FOUND = b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"


def answer(_host: int, target: str) -> bytes:
    return {"/": HOME, "/caf%E9.html": CAFE, "/menu%C3%A9": PAGE}.get(target, NOT_FOUND)


def crawl(backend: CrawlBackend, server: RawServer) -> Crawled:
    crawled = backend.crawl([server.base() + "/"], "--delay", "0", "--no-sitemaps", timeout_s=60)
    assert crawled.returncode == 0, crawled.stderr
    assert "Traceback" not in crawled.stderr
    return crawled


def test_undecodable_header_bytes_do_not_stop_the_crawl(crawl_backend: CrawlBackend) -> None:
    with RawServer(answer) as server:
        crawled = crawl(crawl_backend, server)
        requested = [r.target for r in server.requests if r.target != "/robots.txt"]
    base = server.base()
    # The hop followed inline; the canonical URL from the Link header crawled on its own.
    assert requested[:2] == ["/", "/caf%E9.html"]
    assert sorted(requested[2:]) == ["/b%FCro"]  # X-Robots-Tag nofollow: /menu not followed
    rows = {row["url"]: row for row in crawled.export()}
    assert set(rows) == {base + "/", base + "/b%FCro"}
    home = rows[base + "/"]
    assert (home["status"], home["error"]) == (200, None)
    assert home["final_url"] == base + "/caf%E9.html"
    assert home["content_type"] == "text/html"
    assert home["canonical"] == base + "/b%FCro"
    assert home["title"] == "café"  # a charset that names no codec: ignored, body sniffed
    assert rows[base + "/b%FCro"]["error"] == "http_404"


# Embedded only: a job resumed from its data directory (`trawler crawl --data`).
def test_a_resume_meets_no_poisoned_url(tmp_path: Path) -> None:
    data = tmp_path / "data"
    with RawServer(answer) as server:
        first = run_trawler("crawl", server.base() + "/", "--data", str(data), "--allow-private",
                            "--delay", "0", "--no-sitemaps", "-q", timeout=60)  # fmt: skip
        assert first.returncode == 0, first.stderr
        resumed = run_trawler("crawl", "--data", str(data), "-q", timeout=60)
        assert resumed.returncode == 0, resumed.stderr
    assert "Traceback" not in first.stderr + resumed.stderr
    assert len(export_rows(data)) == 2


def test_warc_keeps_header_bytes_as_sent(crawl_backend: CrawlBackend) -> None:
    with RawServer(answer) as server:
        crawled = crawl(crawl_backend, server)
    paths = sorted(crawled.warc_dir.glob("*.warc.gz"))  # one per worker that wrote
    targets = []
    for path in paths:
        with path.open("rb") as stream:
            targets += [
                record.rec_headers.get_header("WARC-Target-URI")
                for record in ArchiveIterator(stream, check_digests=True)
                if record.rec_type == "response"
            ]
    expected = ["/b%FCro", "/caf%E9.html", "/robots.txt"]  # robots.txt is archived too
    assert sorted(targets) == [server.base() + path for path in expected]
    assert any(CAFE_HEAD in gzip.decompress(path.read_bytes()) for path in paths)
