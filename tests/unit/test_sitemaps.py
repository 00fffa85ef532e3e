"""trawler.sitemaps against the sitemaps.org protocol and against hostile input."""

from __future__ import annotations

import gzip
import time
import tracemalloc
import zlib
from datetime import UTC, datetime

import pytest

from trawler.sitemaps import (
    MAX_URLS,
    SitemapEntry,
    allowed_by_location,
    parse_lastmod,
    parse_sitemap,
    sitemap_urls_from_robots,
)

SITEMAP_URL = "https://example.com/sitemap.xml"
NS = 'xmlns="http://www.sitemaps.org/schemas/sitemap/0.9"'


def urlset(*entries: str, ns: str = NS) -> bytes:
    body = "".join(entries)
    return f'<?xml version="1.0" encoding="UTF-8"?>\n<urlset {ns}>{body}</urlset>'.encode()


def url(loc: str, lastmod: str | None = None) -> str:
    tail = f"<lastmod>{lastmod}</lastmod>" if lastmod is not None else ""
    return f"<url><loc>{loc}</loc>{tail}<changefreq>daily</changefreq></url>"


def locs(body: bytes, **kwargs: int) -> list[str]:
    return [entry.loc for entry in parse_sitemap(body, SITEMAP_URL, **kwargs).urls]


def gzip_bomb(mib: int) -> bytes:
    """``<urlset>`` then ``mib`` MiB of spaces, gzipped, built without holding it all."""
    deflate = zlib.compressobj(1, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    chunk = b" " * (1 << 20)
    parts = [deflate.compress(b"<urlset>")]
    parts += [deflate.compress(chunk) for _ in range(mib)]
    return b"".join([*parts, deflate.flush()])


def utc(year: int, month: int, day: int, hour: int = 0, minute: int = 0, second: int = 0) -> float:
    return datetime(year, month, day, hour, minute, second, tzinfo=UTC).timestamp()


# --- urlset ---------------------------------------------------------------------------


class TestUrlset:
    @pytest.mark.parametrize(
        "ns",
        [
            NS,
            "",
            'xmlns="http://www.google.com/schemas/sitemap/0.84"',
            'xmlns:sm="http://www.sitemaps.org/schemas/sitemap/0.9"',
        ],
    )
    def test_with_or_without_namespace(self, ns: str) -> None:
        body = urlset(url("https://example.com/a"), url("https://example.com/b"), ns=ns)
        doc = parse_sitemap(body, SITEMAP_URL)
        assert doc.kind == "urlset"
        assert [e.loc for e in doc.urls] == ["https://example.com/a", "https://example.com/b"]
        assert doc.error is None and not doc.truncated

    def test_prefixed_elements(self) -> None:
        body = (
            b'<sm:urlset xmlns:sm="http://www.sitemaps.org/schemas/sitemap/0.9">'
            b"<sm:url><sm:loc>https://example.com/a</sm:loc></sm:url></sm:urlset>"
        )
        assert locs(body) == ["https://example.com/a"]

    def test_lastmod_kept_as_given_and_parsed(self) -> None:
        body = urlset(
            url("https://example.com/a", "2024-03-01"),
            url("https://example.com/b", " 2024-03-01T12:30:00+02:00 "),
            url("https://example.com/c", "yesterday"),
            url("https://example.com/d"),
        )
        doc = parse_sitemap(body, SITEMAP_URL)
        assert doc.urls == [
            SitemapEntry("https://example.com/a", "2024-03-01", utc(2024, 3, 1), "daily"),
            SitemapEntry(
                "https://example.com/b",
                "2024-03-01T12:30:00+02:00",
                utc(2024, 3, 1, 10, 30),
                "daily",
            ),
            SitemapEntry("https://example.com/c", "yesterday", None, "daily"),
            SitemapEntry("https://example.com/d", None, None, "daily"),
        ]

    @pytest.mark.parametrize(
        ("given", "kept"),
        [("weekly", "weekly"), (" Never ", "never"), ("ALWAYS", "always"), ("often", None),
         ("", None)],
    )  # fmt: skip
    def test_changefreq_kept_when_the_protocol_knows_it(self, given: str, kept: str | None) -> None:
        body = urlset(f"<url><loc>https://example.com/a</loc><changefreq>{given}</changefreq>"
                      "<image:image><image:changefreq>daily</image:changefreq></image:image>"
                      "</url><url><loc>https://example.com/b</loc></url>")  # fmt: skip
        doc = parse_sitemap(body, SITEMAP_URL)
        assert [entry.changefreq for entry in doc.urls] == [kept, None]

    def test_whitespace_and_entities_in_loc(self) -> None:
        body = urlset(url("\n   https://example.com/q?a=1&amp;b=2&#38;c=3  \n"))
        assert locs(body) == ["https://example.com/q?a=1&b=2&c=3"]

    def test_cdata_loc(self) -> None:
        assert locs(urlset(url("<![CDATA[https://example.com/a?x=1&y=2]]>"))) == [
            "https://example.com/a?x=1&y=2"
        ]

    @pytest.mark.parametrize(
        "loc",
        [
            "/relative/path",
            "page.html",
            "//example.com/no-scheme",
            "ftp://example.com/file",
            "mailto:someone@example.com",
            "javascript:alert(1)",
            "https://",
            "https://exa mple.com/space",
            "https://example.com:99999/bad-port",
            "",
            "https://example.com/" + "x" * 2048,  # sitemaps.org: under 2,048 characters
        ],
    )
    def test_relative_or_malformed_locs_skipped(self, loc: str) -> None:
        doc = parse_sitemap(urlset(url(loc), url("https://example.com/ok")), SITEMAP_URL)
        assert [e.loc for e in doc.urls] == ["https://example.com/ok"]
        assert doc.skipped == 1

    def test_extension_locs_are_not_page_locs(self) -> None:
        # Google's image extension nests its own <image:loc> inside <url>.
        body = urlset(
            "<url><loc>https://example.com/page</loc>"
            "<image:image><image:loc>https://cdn.example.com/i.jpg</image:loc></image:image>"
            '<xhtml:link rel="alternate" href="https://example.com/de/page"/></url>',
            ns=NS + ' xmlns:image="http://www.google.com/schemas/sitemap-image/1.1"'
            ' xmlns:xhtml="http://www.w3.org/1999/xhtml"',
        )
        assert locs(body) == ["https://example.com/page"]

    def test_loc_outside_url_is_ignored(self) -> None:
        assert locs(urlset("<loc>https://example.com/stray</loc>")) == []


class TestIndex:
    def test_child_sitemaps(self) -> None:
        body = (
            b'<?xml version="1.0"?><sitemapindex ' + NS.encode() + b">"
            b"<sitemap><loc>https://example.com/s1.xml.gz</loc>"
            b"<lastmod>2024-01-01</lastmod></sitemap>"
            b"<sitemap><loc> https://example.com/s2.xml </loc></sitemap>"
            b"<sitemap><loc>s3.xml</loc></sitemap>"
            b"<sitemap><loc>https://example.com/sitemap.xml</loc></sitemap>"  # itself
            b"</sitemapindex>"
        )
        doc = parse_sitemap(body, SITEMAP_URL)
        assert doc.kind == "index"
        assert doc.sitemaps == ["https://example.com/s1.xml.gz", "https://example.com/s2.xml"]
        assert doc.urls == [] and doc.skipped == 2

    def test_index_capped_too(self) -> None:
        children = "".join(
            f"<sitemap><loc>https://example.com/s{i}.xml</loc></sitemap>" for i in range(5)
        )
        doc = parse_sitemap(
            f"<sitemapindex>{children}</sitemapindex>".encode(), SITEMAP_URL, max_urls=3
        )
        assert len(doc.sitemaps) == 3 and doc.truncated


class TestFeeds:
    def test_rss(self) -> None:
        body = (
            b'<rss version="2.0"><channel><link>https://example.com/</link>'
            b"<item><title>A</title><link>https://example.com/a</link>"
            b"<pubDate>Tue, 10 Jun 2003 04:00:00 GMT</pubDate></item>"
            b"<item><link>https://example.com/b</link></item></channel></rss>"
        )
        doc = parse_sitemap(body, SITEMAP_URL)
        assert doc.kind == "feed"
        assert doc.urls[0] == SitemapEntry(
            "https://example.com/a", "Tue, 10 Jun 2003 04:00:00 GMT", utc(2003, 6, 10, 4)
        )
        assert [e.loc for e in doc.urls] == ["https://example.com/a", "https://example.com/b"]

    def test_atom(self) -> None:
        body = (
            b'<feed xmlns="http://www.w3.org/2005/Atom"><link href="https://example.com/"/>'
            b'<entry><link rel="enclosure" href="https://example.com/a.mp3"/>'
            b'<link href="https://example.com/a"/><updated>2024-05-06T07:08:09Z</updated></entry>'
            b'<entry><link rel="alternate" href="https://example.com/b"/></entry></feed>'
        )
        doc = parse_sitemap(body, SITEMAP_URL)
        assert doc.kind == "feed"
        assert doc.urls == [
            SitemapEntry("https://example.com/a", "2024-05-06T07:08:09Z", utc(2024, 5, 6, 7, 8, 9)),
            SitemapEntry("https://example.com/b"),
        ]


class TestText:
    def test_one_url_a_line(self) -> None:
        body = b"\xef\xbb\xbfhttps://example.com/a\r\n\n  https://example.com/b  \nnot a url\n"
        doc = parse_sitemap(body, "https://example.com/sitemap.txt")
        assert doc.kind == "text"
        assert [e.loc for e in doc.urls] == ["https://example.com/a", "https://example.com/b"]
        assert doc.skipped == 1

    def test_not_a_sitemap(self) -> None:
        doc = parse_sitemap(b"just some words\nand more\n", SITEMAP_URL)
        assert doc.kind == "invalid" and doc.error == "not_a_sitemap"

    def test_capped(self) -> None:
        body = "\n".join(f"https://example.com/{i}" for i in range(10)).encode()
        doc = parse_sitemap(body, SITEMAP_URL, max_urls=4)
        assert len(doc.urls) == 4 and doc.truncated


# --- limits -----------------------------------------------------------------------------


class TestLimits:
    def test_50001_urls_truncated_at_50000(self) -> None:
        body = urlset(*(url(f"https://example.com/p/{i}") for i in range(MAX_URLS + 1)))
        doc = parse_sitemap(body, SITEMAP_URL)
        assert len(doc.urls) == MAX_URLS
        assert doc.urls[-1].loc == f"https://example.com/p/{MAX_URLS - 1}"
        assert doc.truncated and doc.error is None

    def test_exactly_50000_urls_is_not_truncated(self) -> None:
        body = urlset(*(url(f"https://example.com/p/{i}") for i in range(MAX_URLS)))
        doc = parse_sitemap(body, SITEMAP_URL)
        assert len(doc.urls) == MAX_URLS and not doc.truncated

    def test_50000_urls_parse_fast(self) -> None:
        entries = (
            url(f"https://example.com/p/{i}?a=1&amp;b=2", "2024-01-02T03:04:05+01:00")
            for i in range(MAX_URLS)
        )
        body = gzip.compress(urlset(*entries))
        started = time.perf_counter()
        doc = parse_sitemap(body, SITEMAP_URL)
        elapsed = time.perf_counter() - started
        assert len(doc.urls) == MAX_URLS
        assert elapsed < 5.0  # about 0.5 s on a laptop; generous for busy CI

    def test_uncompressed_size_cap(self) -> None:
        body = urlset(*(url(f"https://example.com/p/{i}") for i in range(1000)))
        doc = parse_sitemap(body, SITEMAP_URL, max_bytes=len(body) // 2)
        assert doc.truncated and doc.error == "too_large"
        assert 0 < len(doc.urls) < 1000  # what came before the cut is kept


class TestGzip:
    def test_gzip_body(self) -> None:
        body = gzip.compress(urlset(url("https://example.com/a")))
        doc = parse_sitemap(body, "https://example.com/sitemap.xml.gz")
        assert [e.loc for e in doc.urls] == ["https://example.com/a"] and doc.error is None

    def test_gzip_text_sitemap(self) -> None:
        assert locs(gzip.compress(b"https://example.com/a\n")) == ["https://example.com/a"]

    def test_multi_member_gzip(self) -> None:
        xml = urlset(url("https://example.com/a"))
        body = gzip.compress(xml[:40]) + gzip.compress(xml[40:])
        assert locs(body) == ["https://example.com/a"]

    def test_gzip_bomb_is_cut_off(self) -> None:
        bomb = gzip_bomb(256)  # 256 MiB of whitespace in an open element, ~1 MB on the wire
        tracemalloc.start()
        try:
            doc = parse_sitemap(bomb, SITEMAP_URL, max_bytes=1 << 20)
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        assert doc.truncated and doc.error == "too_large"
        assert peak < 8 << 20  # bounded by max_bytes, not by what the bomb expands to

    def test_bomb_within_default_cap_is_parsed_to_the_cap(self) -> None:
        doc = parse_sitemap(gzip_bomb(64), SITEMAP_URL)  # 64 MiB > the 50 MB protocol cap
        assert doc.truncated and doc.error == "too_large"

    def test_corrupt_gzip(self) -> None:
        doc = parse_sitemap(b"\x1f\x8b\x08\x00garbage-not-deflate", SITEMAP_URL)
        assert doc.kind == "invalid" and doc.error == "bad_gzip"

    def test_truncated_gzip_keeps_what_inflated(self) -> None:
        xml = urlset(*(url(f"https://example.com/{i}") for i in range(200)))
        doc = parse_sitemap(gzip.compress(xml)[: len(gzip.compress(xml)) // 2], SITEMAP_URL)
        assert 0 < len(doc.urls) < 200 and doc.error == "invalid_xml"


# --- malformed and hostile XML ------------------------------------------------------------


class TestMalformed:
    def test_cut_off_document_keeps_entries_before_the_fault(self) -> None:
        body = urlset(url("https://example.com/a"), url("https://example.com/b"))
        doc = parse_sitemap(body[: body.index(b"https://example.com/b") + 5], SITEMAP_URL)
        assert doc.kind == "urlset" and doc.error == "invalid_xml"
        assert [e.loc for e in doc.urls] == ["https://example.com/a"]

    def test_mismatched_tags(self) -> None:
        body = b"<urlset><url><loc>https://example.com/a</loc></url><url></loc></urlset>"
        doc = parse_sitemap(body, SITEMAP_URL)
        assert doc.error == "invalid_xml" and [e.loc for e in doc.urls] == ["https://example.com/a"]

    def test_undefined_entity(self) -> None:
        doc = parse_sitemap(urlset(url("https://example.com/&nbsp;")), SITEMAP_URL)
        assert doc.error == "invalid_xml" and doc.urls == []

    @pytest.mark.parametrize(
        ("body", "error"),
        [
            (b"", "empty"),
            (b"  \n ", "empty"),
            (b"<html><body>Not found</body></html>", "not_a_sitemap"),
            (b"<", "invalid_xml"),
            (b"\x00\x01\x02binary", "not_a_sitemap"),
        ],
    )
    def test_not_a_sitemap(self, body: bytes, error: str) -> None:
        doc = parse_sitemap(body, SITEMAP_URL)
        assert doc.kind == "invalid" and doc.error == error and doc.urls == []

    def test_utf16_document(self) -> None:
        body = urlset(url("https://example.com/a")).decode().replace('"UTF-8"', '"UTF-16"')
        assert locs(body.encode("utf-16")) == ["https://example.com/a"]


class TestXmlBombs:
    BILLION_LAUGHS = (
        b'<?xml version="1.0"?>\n<!DOCTYPE lolz [\n <!ENTITY lol "lol">\n'
        + b"".join(
            b' <!ENTITY lol%d "%s">\n' % (i, (b"&lol%d;" % (i - 1) if i > 1 else b"&lol;") * 10)
            for i in range(1, 10)
        )
        + b"]>\n<urlset><url><loc>https://example.com/&lol9;</loc></url></urlset>"
    )

    def test_billion_laughs_refused_quickly(self) -> None:
        started = time.perf_counter()
        doc = parse_sitemap(self.BILLION_LAUGHS, SITEMAP_URL)
        assert time.perf_counter() - started < 0.5
        assert doc.kind == "invalid" and doc.error == "doctype" and doc.urls == []

    def test_billion_laughs_in_utf16_refused(self) -> None:
        body = self.BILLION_LAUGHS.decode().replace(
            'version="1.0"', 'version="1.0" encoding="UTF-16"'
        )
        doc = parse_sitemap(body.encode("utf-16"), SITEMAP_URL)
        assert doc.error == "doctype" and doc.urls == []

    def test_billion_laughs_gzipped_refused(self) -> None:
        doc = parse_sitemap(gzip.compress(self.BILLION_LAUGHS), SITEMAP_URL)
        assert doc.error == "doctype"

    def test_external_entity_refused(self) -> None:
        body = (
            b'<?xml version="1.0"?><!DOCTYPE urlset [<!ENTITY xxe SYSTEM "file:///etc/passwd">]>'
            b"<urlset><url><loc>https://example.com/&xxe;</loc></url></urlset>"
        )
        doc = parse_sitemap(body, SITEMAP_URL)
        assert doc.error == "doctype" and doc.urls == []

    def test_never_raises_on_garbage(self) -> None:
        import random

        rng = random.Random(7)
        seed = urlset(url("https://example.com/a?b=1&amp;c=2", "2024-01-01"))
        for _ in range(300):
            mutated = bytearray(seed)
            for _ in range(rng.randint(1, 8)):
                mutated[rng.randrange(len(mutated))] = rng.randrange(256)
            parse_sitemap(bytes(mutated), SITEMAP_URL)  # must not raise


# --- dates ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("2024", utc(2024, 1, 1)),
        ("2024-02", utc(2024, 2, 1)),
        ("2024-02-03", utc(2024, 2, 3)),
        ("2024-02-03T04:05Z", utc(2024, 2, 3, 4, 5)),
        ("2024-02-03T04:05:06+01:00", utc(2024, 2, 3, 3, 5, 6)),
        ("2024-02-03T04:05:06.5-05:30", utc(2024, 2, 3, 9, 35, 6) + 0.5),
        ("2024-02-03T04:05:06", utc(2024, 2, 3, 4, 5, 6)),  # no zone: UTC
        ("Tue, 10 Jun 2003 04:00:00 GMT", utc(2003, 6, 10, 4)),  # RSS pubDate
        ("2024-13-01", None),
        ("2024-02-30", None),
        ("03/02/2024", None),
        ("", None),
        (None, None),
    ],
)
def test_parse_lastmod(value: str | None, expected: float | None) -> None:
    assert parse_lastmod(value) == expected


# --- which sitemaps, and which of their URLs ---------------------------------------------


class TestLocationRule:
    @pytest.mark.parametrize(
        ("sitemap", "loc", "allowed"),
        [
            # sitemaps.org "Sitemap file location" examples
            (
                "http://example.com/catalog/sitemap.xml",
                "http://example.com/catalog/show?item=2",
                True,
            ),
            ("http://example.com/catalog/sitemap.xml", "http://example.com/catalog/", True),
            ("http://example.com/catalog/sitemap.xml", "http://example.com/images/x.jpg", False),
            ("http://example.com/catalog/sitemap.xml", "http://example.com/catalogue", False),
            ("http://example.com/sitemap.xml", "http://example.com/anything/at/all", True),
            ("http://example.com/sitemap.xml", "https://example.com/", False),  # scheme
            ("http://example.com/sitemap.xml", "http://www.example.com/", False),  # host
            ("http://example.com/sitemap.xml", "http://example.com:8080/", False),  # port
            ("http://example.com/sitemap.xml", "http://example.com:80/x", True),  # default port
            ("http://EXAMPLE.com/sitemap.xml", "HTTP://example.COM/x", True),
            ("http://example.com/sitemap.php?page=2", "http://example.com/a", True),
            ("http://example.com/sitemap.xml", "/relative", False),
        ],
    )
    def test_path_prefix(self, sitemap: str, loc: str, allowed: bool) -> None:
        assert allowed_by_location(sitemap, loc, from_robots=False) is allowed

    @pytest.mark.parametrize(
        ("loc", "allowed"),
        [
            ("http://example.com/images/x.jpg", True),  # any path on the host
            ("https://example.com/images/x.jpg", False),
            ("http://other.example.org/", False),  # same host only
        ],
    )
    def test_from_robots_any_path_on_the_host(self, loc: str, allowed: bool) -> None:
        sitemap = "http://example.com/catalog/sitemap.xml"
        assert allowed_by_location(sitemap, loc, from_robots=True) is allowed


class TestSitemapUrlsFromRobots:
    def test_listed_ones_in_order_deduplicated(self) -> None:
        listed = [
            "https://example.com/s1.xml",
            " https://cdn.example.net/s2.xml.gz ",
            "/relative.xml",
            "https://example.com/s1.xml",
        ]
        assert sitemap_urls_from_robots(listed, "https://example.com") == [
            "https://example.com/s1.xml",
            "https://cdn.example.net/s2.xml.gz",
        ]

    @pytest.mark.parametrize("listed", [[], ["/relative.xml", "ftp://example.com/s.xml"]])
    def test_default_when_none_listed(self, listed: list[str]) -> None:
        assert sitemap_urls_from_robots(listed, "https://example.com:8443") == [
            "https://example.com:8443/sitemap.xml"
        ]
