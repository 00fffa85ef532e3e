"""ultimate-sitemap-parser's test documents (55: robots.txt, XML urlsets and indexes,
plain text, RSS, Atom, gzip, truncated, hostile) and the URLs it extracts from each,
against trawler.sitemaps and the Sitemap lines of trawler.robots: all 55 agree."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest

from trawler import robots
from trawler.sitemaps import parse_sitemap

SUITE = Path(__file__).parent.parent / "data" / "conformance" / "usp_sitemap_cases.json"
CASES: list[dict[str, Any]] = json.loads(SUITE.read_text(encoding="utf-8"))["cases"]


def trawler_urls(case: dict[str, Any]) -> list[str]:
    """The URLs Trawler takes from the document: page URLs, or child sitemaps."""
    body = base64.b64decode(case["body_b64"])
    if case["usp_type"] == "IndexRobotsTxtSitemap":
        return robots.parse(body, "trawler").sitemaps
    doc = parse_sitemap(body, case["final_url"])
    if case["usp_type"] == "InvalidSitemap":
        assert doc.kind == "invalid"
    return doc.sitemaps if doc.kind == "index" else [entry.loc for entry in doc.urls]


def usp_urls(case: dict[str, Any]) -> list[str]:
    """USP's answer, with the one documented Trawler rule applied: an index entry that
    points back at the index itself is dropped while parsing (sitemaps.py), where USP
    lists it and then refuses to fetch it ("recursion detected"); neither fetches it."""
    if case["usp_type"] == "IndexXMLSitemap":
        return [url for url in case["expected"] if url != case["final_url"]]
    return case["expected"]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c["test"].rpartition("::")[2])
def test_usp_case(case: dict[str, Any]) -> None:
    assert trawler_urls(case) == usp_urls(case)


def test_suite_is_whole() -> None:
    assert len(CASES) == 55
    assert sum(trawler_urls(case) == usp_urls(case) for case in CASES) == 55


def test_atom_entry_takes_its_first_alternate_link() -> None:
    # RFC 4287 §4.2.7.2: a link without rel is rel="alternate". The entry's page is the
    # first alternate; a later one (another type or language) does not replace it.
    feed = (
        b'<feed xmlns="http://www.w3.org/2005/Atom"><entry>'
        b'<link rel="edit" href="https://e.org/a?edit"/>'
        b'<link href="https://e.org/a"/>'
        b'<link rel="alternate" type="text/html" href="https://e.org/a?alt"/>'
        b"</entry><entry>"
        b'<link rel="alternate" href="https://e.org/b"/><link href="https://e.org/b?2"/>'
        b"</entry></feed>"
    )
    doc = parse_sitemap(feed, "https://e.org/feed.xml")
    assert [entry.loc for entry in doc.urls] == ["https://e.org/a", "https://e.org/b"]
