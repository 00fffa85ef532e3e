"""safetext: whatever bytes a server sends, what we store is text every sink takes."""

from __future__ import annotations

import json

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from trawler.safetext import raw_bytes, safe_text, safe_url
from trawler.seeds import spool_seeds
from trawler.urls import Normaliser, normalise


def from_wire(data: bytes) -> str:
    """What aiohttp (and fetch.py) make of header bytes."""
    return data.decode("utf-8", "surrogateescape")


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("http://h/caf\udce9.html", "http://h/caf%E9.html"),  # Latin-1 byte: as browsers do
        ("http://h/café?q=é#é", "http://h/caf%C3%A9?q=%C3%A9#%C3%A9"),  # UTF-8
        ("http://h/a b\x00\x7f", "http://h/a%20b%00%7F"),
        ("http://h/%E9%zz", "http://h/%E9%zz"),  # already encoded, or not ours to fix
        ("http://bücher.de/ü", "http://bücher.de/%C3%BC"),  # IDN host left for IDNA
        ("http://b\udcfcr.de/", "http://b%FCr.de/"),  # not text: cannot be a host either
        ("/rel\ud800", "/rel%EF%BF%BD"),  # a surrogate that escapes no byte
        ("http://h/plain", "http://h/plain"),
        (" \x00http://h/a\tb\n\x01", "http://h/ab"),  # WHATWG: stripped, tab/newline dropped
    ],
)
def test_safe_url(url: str, expected: str) -> None:
    assert safe_url(url) == expected


def test_safe_text_replaces_undecodable_bytes_and_nul() -> None:
    assert safe_text(from_wire(b"caf\xe9 cr\xc3\xa8me\x00")) == "caf\ufffd crème\ufffd"
    assert safe_text("plain") == "plain"


def test_raw_bytes_round_trips_wire_bytes() -> None:
    assert raw_bytes(from_wire(b"\xff\xfe /caf\xe9")) == b"\xff\xfe /caf\xe9"


def test_seeds_are_spooled_as_text() -> None:
    # A NUL or an argv byte that is not UTF-8 is percent-encoded, as in a fetched URL.
    spool = spool_seeds(["http://h/x\x00y", " http://h/caf\udce9 "], None, Normaliser())
    with spool:
        assert list(spool.chunks()) == [["http://h/x%00y", "http://h/caf%E9"]]


@given(st.binary(max_size=200))
@example(b"\xed\xa0\x80")  # UTF-8 of a surrogate: invalid, escaped byte by byte
def test_wire_bytes_become_safe_text(data: bytes) -> None:
    text = safe_text(from_wire(data))
    text.encode("utf-8")  # raises on a lone surrogate
    assert "\x00" not in text
    json.dumps(text, ensure_ascii=False).encode("utf-8")
    if b"\x00" not in data:
        assert text == data.decode("utf-8", "replace")


@given(st.binary(max_size=200))
def test_wire_urls_become_printable_ascii_urls(data: bytes) -> None:
    url = safe_url("http://h/" + from_wire(data))
    assert url.isascii() and url.isprintable() and " " not in url
    assert safe_url(url) == url  # idempotent
    assert normalise(url) is not None  # and fit to crawl


@given(st.text(max_size=100))
def test_any_str_becomes_encodable(text: str) -> None:
    safe_text(text).encode("utf-8")
    safe_url(text).encode("utf-8")
