"""Property: whatever bytes a server sends, the crawl finishes with every URL recorded.

Hypothesis draws the status line, the headers that reach our parsers
(Location, Content-Type, Link, X-Robots-Tag, Retry-After, Content-Encoding)
and the body of each host's home page; a raw-socket server on loopback
(tests/e2e/raw_server.py) sends them byte for byte. Each example is a real
crawl in this process: the engine, the real fetcher over a socket, the real
WARC writer and the real SQLite store (the embedded backend), with page
analysis inline (``parse_processes=0``, the same code the worker processes run).

Checked after each crawl: it ends without raising and reports itself
complete; no URL is left queued; every URL fetched has a page row (skipped
ones a reason), none of them an ``internal`` error; every URL the server was
asked for is the url or final_url of a row; every row's text is text every
sink takes (valid UTF-8, no NUL); the WARC files read back with digests
checked, one response record per row that has one; the export writes.

The first test draws each host's home page only (every other path answers a
fixed small page, robots.txt a 404), with sitemaps off: a drawn 429 with
``Retry-After: 3600`` would hold the host's /sitemap.xml back for an hour.
The second draws every path (robots.txt, sitemaps, redirect targets, linked
pages; Content-Length and Transfer-Encoding too) with sitemaps on, from
answers that do not ask the host to wait. Each example takes about 0.3 s;
TRAWLER_POISON_EXAMPLES (default 40) sets the number for a longer bug hunt.
"""

from __future__ import annotations

import asyncio
import csv
import gzip
import io
import json
import os
import sqlite3
import tempfile
import zlib
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from warcio.archiveiterator import ArchiveIterator

from tests.e2e.conftest import job_data
from tests.e2e.raw_server import RawServer
from trawler.config import CrawlConfig
from trawler.engine import Crawler
from trawler.export import write_export
from trawler.store import sqlite as db
from trawler.store.embedded import EmbeddedBackend
from trawler.store.kinds import EXPORT_KINDS
from trawler.urls import Normaliser, normalise

HOSTS = 3
EXAMPLES = int(os.environ.get("TRAWLER_POISON_EXAMPLES", "40"))
CRAWL_TIMEOUT_S = 30.0  # one crawl of a handful of URLs takes well under a second
FIXED_PAGE = b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nConnection: close\r\n\r\n<p>ok"
NOT_FOUND = b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
HEADER_NAMES = ("Location", "Content-Type", "Link", "X-Robots-Tag", "Retry-After",
                "Content-Encoding")  # fmt: skip

_normalise = Normaliser()

# -- what a server may send ----------------------------------------------------------


def _fragments(*values: bytes) -> st.SearchStrategy[bytes]:
    """Bytes built from interesting pieces and arbitrary bytes."""
    piece = st.one_of(st.sampled_from(values), st.binary(max_size=12))
    return st.lists(piece, max_size=4).map(b"".join)


CODES = (b"200", b"301", b"302", b"303", b"307", b"308", b"429", b"503", b"404", b"500", b"204",
         b"304", b"100", b"999", b"0", b"2\xe90")  # fmt: skip
PAUSE_CODES = (b"429", b"503")  # 429/503: the host waits (retry.py)


def _status_lines(codes: tuple[bytes, ...]) -> st.SearchStrategy[bytes]:
    well_formed = st.builds(
        lambda version, code, reason: version + b" " + code + b" " + reason,
        st.sampled_from([b"HTTP/1.1", b"HTTP/1.0", b"HTTP/2", b"HTTP/1.\xff", b"ICY"]),
        st.sampled_from(codes),
        st.binary(max_size=10),
    )
    return st.one_of(well_formed, st.binary(max_size=30))


_HEADER_VALUES = {
    "Location": _fragments(b"/caf\xe9.html", b"/caf\xc3\xa9", b"http://", b"//", b"/", b"?",
                           b"#", b"%", b"%zz", b"\x00", b" ", b"\t", b"[", b"http://[::1", b"..",
                           b"\xed\xa0\x80", b"javascript:", b"\xf0\x9f\x92\xa9"),
    "Content-Type": _fragments(b"text/html", b"; charset=", b"utf-8", b"\xe9", b"utf-16",
                               b"utf-7", b"iso-2022-jp", b"x-user-defined", b"application/xml"),
    "Link": _fragments(b"<", b">", b"/b\xfcro", b"; rel=", b'"canonical"', b"canonical", b","),
    "X-Robots-Tag": _fragments(b"noindex", b"nofollow", b"none", b",", b":", b"trawler:",
                               b"max-snippet: 2", b"\xe9"),
    "Retry-After": _fragments(b"0", b"1", b"\xb2", b"\xd9\xa3", b"99999999999999999999",
                              b"Wed, 21 Oct 2015 07:28:00 GMT", b"Fri, 31 Dec 9999 23:59:59 GMT",
                              b"Mon, 01 Jan 0001 00:00:00 +9999"),
    "Content-Encoding": _fragments(b"gzip", b"deflate", b"br", b"identity", b",", b"x-gzip",
                                   b"\xe9"),
    "Content-Length": _fragments(b"0", b"5", b"100000", b"-1", b"1e3", b" 5"),
    "Transfer-Encoding": _fragments(b"chunked", b"gzip", b",", b"identity"),
}  # fmt: skip
FRAMING = ("Content-Length", "Transfer-Encoding")
_BODIES = st.one_of(
    st.binary(max_size=300),
    _fragments(b"<title>", b"</title>", b"<a href='", b"'>", b"\xe9", b"\x00", b"<meta charset=",
               b"<link rel=canonical href=", b"<base href=", b"<svg><![CDATA[", b"]]>",
               b"<meta name=robots content=noindex>", b"<plaintext>", b"&#0;", b"&#xD800;"),
    st.binary(max_size=200).map(gzip.compress),
    st.binary(max_size=200).map(zlib.compress),
    _fragments(b"User-agent: *\n", b"Disallow: /", b"Allow: /", b"Sitemap: ", b"/s.xml\n",
               b"Crawl-delay: 9\n", b"\xe9", b"*", b"$", b"<urlset><url><loc>", b"</loc>",
               b"<lastmod>", b"</lastmod></url>", b"<sitemapindex>", b"<?xml version='1.0'?>"),
)  # fmt: skip


@st.composite
def responses(
    draw: st.DrawFn, names: tuple[str, ...] = HEADER_NAMES, codes: tuple[bytes, ...] = CODES
) -> bytes:
    """One raw answer: a status line, some of ``names`` as headers, a body, then close."""
    lines = [draw(_status_lines(codes))]
    for name in draw(st.lists(st.sampled_from(names), max_size=6)):
        lines.append(name.encode() + b": " + draw(_HEADER_VALUES[name]))
    if draw(st.booleans()):
        lines.append(b"Connection: close")
    return b"\r\n".join(lines) + b"\r\n\r\n" + draw(_BODIES)


# -- the crawl -----------------------------------------------------------------------


class Site:
    """The server's script: each host's home page and robots.txt, and the other paths."""

    def __init__(self) -> None:
        self.homes: list[bytes] = []
        self.robots: list[bytes] = []
        self.others: list[bytes] = []  # answers for other paths, picked by path

    def answer(self, host: int, target: str) -> bytes:
        if target == "/robots.txt":
            return self.robots[host] if host < len(self.robots) else NOT_FOUND
        if target == "/" and host < len(self.homes):
            return self.homes[host]
        if self.others:
            return self.others[zlib.crc32(target.encode("latin-1")) % len(self.others)]
        return FIXED_PAGE


@pytest.fixture(scope="module")
def served() -> Iterator[tuple[Site, RawServer]]:
    site = Site()
    with RawServer(site.answer, hosts=HOSTS) as server:
        yield site, server


def crawl(seeds: list[str], data: Path, sitemaps: bool = False) -> bool:
    config = CrawlConfig(
        allow_private=True, delay_s=0, max_attempts=1, sitemaps=sitemaps,
        parse_processes=0, timeout_s=5, connect_timeout_s=5, robots_retry_waits_s=[0.01],
        concurrency=8, max_crawl_delay_s=0.01,
    )  # fmt: skip
    backend = EmbeddedBackend(data)
    backend.store.create_job(config)
    crawler = Crawler(config, backend, seeds=[[normalise(seed) or seed for seed in seeds]])
    return asyncio.run(asyncio.wait_for(crawler.run(0), CRAWL_TIMEOUT_S))


# -- the checks ----------------------------------------------------------------------


def check_store(data: Path, seeds: list[str], asked: list[str]) -> list[sqlite3.Row]:
    conn = db.connect(job_data(data), readonly=True)
    try:
        urls = conn.execute("SELECT url, state, reason FROM urls").fetchall()
        pages = conn.execute("SELECT * FROM pages").fetchall()
    finally:
        conn.close()
    rows = {row["url"]: row for row in pages}
    for url in urls:
        assert url["state"] != db.QUEUED, f"{url['url']} left queued"
        if url["state"] == db.SKIPPED:
            assert url["reason"], url["url"]
        else:
            assert url["url"] in rows, f"{url['url']} fetched but has no page row"
    assert {_normalise(seed) for seed in seeds} <= {url["url"] for url in urls}
    stored = {_normalise(u) for row in pages for u in (row["url"], row["final_url"]) if u}
    for url in asked:
        assert _normalise(url) in stored, f"the server was asked for {url}: no row names it"
    for row in pages:
        assert row["error"] != "internal", dict(row)
        for value in tuple(row):
            if isinstance(value, str):
                value.encode("utf-8")  # no lone surrogates
                assert "\x00" not in value, dict(row)  # PostgreSQL refuses NUL
    return pages


def check_warc(data: Path, pages: list[sqlite3.Row]) -> None:
    targets = []
    for path in (job_data(data) / "warc").glob("*.warc.gz"):
        with path.open("rb") as stream:
            for record in ArchiveIterator(stream, check_digests=True):
                if record.rec_type == "response":
                    targets.append(record.rec_headers.get_header("WARC-Target-URI"))
                record.raw_stream.read()  # to the end: the digests are checked
                assert record.digest_checker.passed is True, record.digest_checker.problems
    conn = db.connect(job_data(data), readonly=True)
    try:  # robots.txt answers are archived as pages are, a row each
        robots = conn.execute("SELECT final_url, warc_file FROM robots_fetches").fetchall()
    finally:
        conn.close()
    archived = [row["final_url"] for row in [*pages, *robots] if row["warc_file"]]
    assert sorted(targets) == sorted(archived)


def check_export(data: Path) -> None:
    conn = db.connect(job_data(data), readonly=True)
    try:
        for fmt in ("jsonl", "csv"):
            out = io.StringIO()
            write_export(conn, out, fmt, True, frozenset(EXPORT_KINDS))
            out.getvalue().encode("utf-8")
            if fmt == "jsonl":
                [json.loads(line) for line in out.getvalue().splitlines()]
            else:
                list(csv.reader(io.StringIO(out.getvalue())))
    finally:
        conn.close()


@settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
    database=None,
)
@given(homes=st.lists(responses(), min_size=HOSTS, max_size=HOSTS))
# Found before the fix: a Location byte that is not UTF-8 failed the WARC write, a
# Content-Type one the SQLite insert (UnicodeEncodeError), at every commit.
@example(homes=[b"HTTP/1.1 302 Found\r\nLocation: /caf\xe9.html\r\n\r\n"] * HOSTS)
@example(homes=[b"HTTP/1.1 200 \r\nContent-Type: \x80\r\n\r\n"] * HOSTS)
def test_any_bytes_from_a_server_end_with_every_url_recorded(
    served: tuple[Site, RawServer], homes: list[bytes]
) -> None:
    site, server = served
    site.homes, site.robots, site.others = homes, [], []
    crawl_and_check(server)


def _head(answer: bytes) -> bytes:
    return answer.partition(b"\r\n\r\n")[0].lower()


def _no_pause(answer: bytes) -> bool:
    """No 429/503, no Retry-After: rare from arbitrary bytes, but an hour's wait."""
    status_line = answer.partition(b"\r\n")[0]
    return not any(b" " + code in status_line for code in PAUSE_CODES) and (
        b"retry-after" not in _head(answer)
    )


def _no_redirect(answer: bytes) -> bool:
    return b"location" not in _head(answer)


_CALM_CODES = tuple(code for code in CODES if code not in PAUSE_CODES)
_NO_WAIT_HEADERS = tuple(n for n in HEADER_NAMES if n not in ("Retry-After", "Location")) + FRAMING
_CALM = responses(_NO_WAIT_HEADERS, _CALM_CODES).filter(_no_pause)


@settings(
    max_examples=max(EXAMPLES // 2, 1),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
    database=None,
)
@given(
    homes=st.lists(
        responses(_NO_WAIT_HEADERS + ("Location",), _CALM_CODES).filter(_no_pause),
        min_size=HOSTS,
        max_size=HOSTS,
    ),
    # A robots.txt redirect hop would be a request no page row names.
    robots=st.lists(_CALM.filter(_no_redirect), min_size=HOSTS, max_size=HOSTS),
    others=st.lists(
        st.one_of(_CALM, responses(("Location", "Content-Type"), _CALM_CODES).filter(_no_pause)),
        min_size=1,
        max_size=4,
    ),
)
def test_any_bytes_on_every_path_with_sitemaps(
    served: tuple[Site, RawServer], homes: list[bytes], robots: list[bytes], others: list[bytes]
) -> None:
    """robots.txt, sitemaps, redirect targets and linked pages answer drawn bytes too.

    No answer here asks the host to wait (429, 503, Retry-After: the test above
    has those): the pages after it on that host, its /sitemap.xml at least,
    would wait with it, for up to an hour.
    """
    site, server = served
    site.homes, site.robots, site.others = homes, robots, others
    crawl_and_check(server, sitemaps=True)


def crawl_and_check(server: RawServer, sitemaps: bool = False) -> None:
    seeds = [server.base(host) + "/" for host in range(HOSTS)]
    server.requests.clear()
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp)
        assert crawl(seeds, data, sitemaps) is True
        # A redirecting answer may be a hop inside a chain: only the chain's first
        # and last URL are named by its row.
        asked = [server.base(r.host) + r.target for r in server.requests
                 if r.target != "/robots.txt" and _no_redirect(r.answer)]  # fmt: skip
        pages = check_store(data, seeds, asked)
        check_warc(data, pages)
        check_export(data)
