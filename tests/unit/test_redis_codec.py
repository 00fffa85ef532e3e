"""Queue entries of the Redis frontier (frontier/redis_codec.py) carry a sitemap
entry's <changefreq> (issue 15), and entries written before it was carried still
decode, byte for byte the same as their writers made them."""

from __future__ import annotations

from trawler.dedup import url_fingerprint
from trawler.frontier.redis_codec import decode_request, encode_request
from trawler.records import CrawlRequest
from trawler.urls import host_key


def listed(url: str, lastmod: str | None, changefreq: str | None) -> CrawlRequest:
    return CrawlRequest(url, 1, "http://a.test/sitemap.xml", host_key(url), url_fingerprint(url),
                        0, "page", lastmod, changefreq=changefreq)  # fmt: skip


def test_changefreq_round_trips() -> None:
    for lastmod in (None, "2024-05-01"):
        for changefreq in ("daily", "never", "weekly"):
            r = listed("http://a.test/p", lastmod, changefreq)
            assert decode_request(encode_request(r), r.host, r.depth) == r


def test_an_entry_without_changefreq_is_written_as_before() -> None:
    """The same bytes as a Trawler that never carried it (re-adding a URL's entry is a
    no-op, and a worker of the older version reads it)."""
    r = listed("http://a.test/p", "2024-05-01", None)
    fp = r.fp.to_bytes(8, "big", signed=True)
    assert encode_request(r) == b'/p\n14|sitemap.xml\n[0,"page","2024-05-01"]' + fp


def test_an_entry_of_the_older_layout_decodes_without_changefreq() -> None:
    url = "http://a.test/p"
    fp = url_fingerprint(url).to_bytes(8, "big", signed=True)
    old = b'/p\n14|sitemap.xml\n[2,"page","2024-05-01"]' + fp
    r = decode_request(old, "a.test", 3)
    assert (r.attempts, r.lastmod, r.changefreq, r.depth) == (2, "2024-05-01", None, 3)
    assert r.parent_url == "http://a.test/sitemap.xml"
