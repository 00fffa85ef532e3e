"""Property-based tests of the link extractor and its neighbours on hostile input.

tests/unit/test_parse.py and test_urls.py already check that ``parse_html`` and
``normalise`` never raise; here hypothesis builds HTML-ish documents with
arbitrary href values and base URLs and checks what the extracted links are.
"""

from __future__ import annotations

from urllib.parse import urlsplit

from hypothesis import given, settings
from hypothesis import strategies as st

from trawler.outcome import sniffed_type
from trawler.parse import parse_html
from trawler.urls import Normaliser

_normalise = Normaliser()

# Href values: arbitrary text, plus URL-ish pieces that exercise the resolver's
# fast paths and its fallbacks (schemes, dot segments, IPv6 brackets, IDN).
_URLISH = st.lists(
    st.sampled_from(
        [
            "http://",
            "https://",
            "HTTP://",
            "//",
            "/",
            "../",
            "./",
            "..",
            "?",
            "#",
            "%",
            "%zz",
            "%2e",
            "[",
            "]",
            ":",
            "@",
            "javascript:",
            "mailto:x",
            "data:,",
            "ftp://h/",
            "bücher",
            "xn--",
            "\u2603",
            " ",
            "\t",
            "\n",
            "\x00",
            "\\",
            "a",
            "example.com",
            ":80",
            "&amp;",
            "&#x2F;",
            "\ud800",
            "\u200b",
            "\ufeff",
        ]
    ),  # fmt: skip
    max_size=12,
).map("".join)
_HREF = st.one_of(st.text(max_size=40), _URLISH)
_BASE = st.one_of(
    st.sampled_from(
        ["https://example.com/a/b.html?q=1", "http://h:8080/", "http://[::1]/x/", "https://ä.de/"]
    ),
    st.text(max_size=30),
)
_QUOTE = st.sampled_from(['"', "'", ""])
_TAG = st.sampled_from(["a", "A", "area", "base", "link rel=canonical", "img"])


@st.composite
def _documents(draw: st.DrawFn) -> str:
    """An HTML-ish document of tags with hrefs, text and unclosed constructs."""
    pieces = []
    for _ in range(draw(st.integers(0, 12))):
        tag, quote = draw(_TAG), draw(_QUOTE)
        pieces.append(f"<{tag} href={quote}{draw(_HREF)}{quote}>{draw(st.text(max_size=5))}")
        if draw(st.booleans()):
            pieces.append(draw(st.sampled_from(["</a>", "<p>", "<!--", "<script>", "<title>"])))
    return "".join(pieces)


@settings(max_examples=300, deadline=None)
@given(doc=_documents(), base=_BASE, max_links=st.integers(1, 8), encoding=st.sampled_from(
    ["utf-8", "utf-16", "cp1252"]))  # fmt: skip
def test_links_never_raise_and_are_http_urls(
    doc: str, base: str, max_links: int, encoding: str
) -> None:
    body = doc.encode(encoding, "replace" if encoding == "cp1252" else "surrogatepass")
    page = parse_html(body, base, max_links=max_links)
    assert len(page.links) <= max_links
    for link in page.links:
        parts = urlsplit(link.url)
        assert parts.scheme in ("http", "https"), link.url
        normalised = _normalise(link.url)  # never raises; None for e.g. an empty host
        assert normalised is None or normalised.startswith(("http://", "https://"))
    if page.canonical is not None:
        assert urlsplit(page.canonical).scheme in ("http", "https")


@settings(max_examples=100, deadline=None)
@given(n=st.integers(0, 30), max_links=st.integers(1, 20))
def test_links_capped_at_max_keeping_document_order(n: int, max_links: int) -> None:
    body = "".join(f"<a href=p{i}>{i}</a>" for i in range(n)).encode()
    links = parse_html(body, "http://h/dir/", max_links=max_links).links
    assert [link.url for link in links] == [f"http://h/dir/p{i}" for i in range(min(n, max_links))]


@settings(max_examples=200, deadline=None)
@given(body=st.binary(max_size=64), content_type=st.sampled_from([None, "*/*", "text/plain"]))
def test_sniffing_never_raises_and_only_upgrades_unknown_types(
    body: bytes, content_type: str | None
) -> None:
    sniffed = sniffed_type(content_type, body)
    assert sniffed in (content_type, "text/html")
    if content_type == "text/plain":
        assert sniffed == "text/plain"  # a declared type is never second-guessed


# Bytes that lead HTML parsers to keep NUL or odd code points if they can.
_HOSTILE_HTML = st.lists(
    st.one_of(
        st.sampled_from(
            [
                b"<title>",
                b"</title>",
                b"<a href='",
                b"'>",
                b"\xe9",
                b"\x00",
                b"<meta charset=",
                b"<link rel=canonical href=",
                b"<base href=",
                b"<svg><![CDATA[",
                b"]]>",
                b"<math><mi>",
                b"<template>",
                b"<meta name=description content='",
                b"<plaintext>",
                b"&#0;",
                b"&#xD800;",
                b"&#xDC80;",
                b"<textarea>",
                b"<script>",
                b"<!--",
                b"<main>",
                b"\xed\xa0\x80",
                b"\xff\xfe",
                b"\xfe\xff",
                b"\xef\xbb\xbf",
            ]
        ),
        st.binary(max_size=8),
    ),  # fmt: skip
    max_size=12,
).map(b"".join)


_CHARSETS = st.sampled_from(
    [None, "utf-8", "utf-16", "cp1252", "utf-7", "x-user-defined", "iso-2022-jp", "\udce9"]
)


@settings(max_examples=300, deadline=None)
@given(body=_HOSTILE_HTML, charset=_CHARSETS)
def test_parsed_text_is_storable(body: bytes, charset: str | None) -> None:
    """What the parser extracts goes to SQLite, PostgreSQL and exports: valid UTF-8, no NUL
    (lexbor replaces NUL and bad references with U+FFFD; this keeps it so)."""
    page = parse_html(body, "http://h/", charset)
    values = [page.title, page.description, page.keywords, page.text, page.main_text,
              page.canonical, page.base_href, *(link.url for link in page.links)]  # fmt: skip
    for value in filter(None, values):
        value.encode("utf-8")
        assert "\x00" not in value
