"""URL canonicalisation against the peers' own test pairs
(tests/data/conformance/canon_pairs.json: w3lib's ``canonicalize_url`` and
url-normalize, default options).

How merges are measured. Each pair says "the peer turns ``input`` into
``expected``", that is: the peer holds ``input`` and ``expected`` to be one
URL. Per peer, every input and every expected URL is put in the class of its
pair's expected URL, compared by a key that takes out what Trawler drops by
documented choice and a peer keeps: userinfo, the fragment, and the order of
query parameters of different keys (Trawler sorts them; stable, so values of
one key keep their order). Then, with ``normalise`` as Trawler's canonical form:

- a *false merge* is two URLs of different classes that Trawler normalises to
  the same URL (two pages crawled as one: a page lost). There must be none.
- a *missed merge* is a class whose URLs Trawler normalises to more than one
  URL (one page fetched twice). Each one is a decision, listed in
  ``MISSED_MERGES`` with its reason; the test fails if one appears that is not
  listed, or if a listed one is gone (the list must stay true).

A URL Trawler rejects (None) merges with nothing.

``NOT_ADOPTED`` lists the pairs left out of the measure: a peer's rewriting
that is no statement that two URLs name one page.
"""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import pytest

from trawler.urls import normalise

_DATA = Path(__file__).parent.parent / "data" / "conformance" / "canon_pairs.json"
PAIRS = json.loads(_DATA.read_text("utf-8"))["pairs"]

NOT_ADOPTED = {
    # url-normalize rewrites "#!x" to "?_escaped_fragment_=x": Google's AJAX
    # crawling scheme, deprecated by Google in 2015. For Trawler a fragment,
    # "#!" included, names a part of the page: http://site/#!x is http://site/.
    ("url-normalize", "http://example.com/#!5753509/hello-world"),
    ("url-normalize", "http://site/#!fragment"),
}

# (peer, class key) → why Trawler keeps those URLs apart. Rule of thumb: a
# missed merge costs one extra fetch, a false merge loses a page, so two forms
# are merged only where RFC 3986 §6.2.2 / WHATWG URL say they are one URL.
MISSED_MERGES = {
    ("w3lib", "http://www.example.com/do?a=1&q=a+space"):
        # "+" is a space only in application/x-www-form-urlencoded; RFC 3986 and
        # WHATWG keep "+" and "%20" apart, and a server reading the raw query
        # (?tz=+01:00, ?q=C++, base64 tokens) sees different values.
        "'+' vs '%20' (and ' ') in a query: kept apart",
    ("w3lib", "http://www.example.com/do?a=2&b=&c="):
        # ?c and ?c= differ for many frameworks (Rack: nil vs ""; a flag
        # parameter tested for presence); WHATWG keeps them apart too.
        "bare key vs 'key=': kept apart",
    ("w3lib", "http://www.example.com/do?1750%2C4="):
        # bare key vs "key=" again, and "," vs "%2C": a reserved character
        # and its percent-encoding are different data (RFC 3986 §2.2, §6.2.2.2).
        "bare key vs 'key=', ',' vs '%2C': kept apart",
    ("w3lib", "http://www.example.com/do?a=1&price%28%C2%A3%29=500"):
        # "(" vs "%28": reserved characters are not decoded (RFC 3986 §6.2.2.2).
        "'(' vs '%28' in a query: kept apart",
    ("w3lib", "http://www.example.com/do?a=50&b=2&b=5&c=3"):
        # w3lib sorts by value too; the order of one key's values is data
        # (?sort=price&sort=date), so Trawler's sort is stable.
        "values of a repeated key reordered: kept apart",
    ("url-normalize", "http://example.com/?q=%C3%87"):
        # Unicode normalisation (NFC) of decoded text: servers compare bytes,
        # and neither RFC 3986 nor WHATWG normalise Unicode.
        "NFC vs NFD percent-encoded text: kept apart",
    ("url-normalize", "http://example.com/?q=%EF%BF%BD"):
        # url-normalize replaces invalid UTF-8 (%C7) by U+FFFD: every bad byte
        # would name one URL. Lossy: kept.
        "invalid UTF-8 replaced by U+FFFD: kept apart",
    ("url-normalize", "http://example.com/foo/"):
        # "//" in a path is an empty segment (RFC 3986 §3.3); servers and
        # WHATWG keep it, many routers treat /foo// and /foo/ differently.
        "'//' collapsed in a path: kept apart",
    ("url-normalize", "http://example.com/foo/bar/"):
        "'//' collapsed in a path: kept apart",
}  # fmt: skip


def class_key(url: str) -> str:
    """``url`` without userinfo, fragment and the order of different keys."""
    parts = urlsplit(url)
    params = [param for param in parts.query.split("&") if param]
    params.sort(key=lambda param: param.partition("=")[0])
    host = parts.netloc.rpartition("@")[2]
    return urlunsplit((parts.scheme, host, parts.path, "&".join(params), ""))


def classes(peer: str) -> dict[str, set[str]]:
    """Class key → the URLs the peer holds to be that URL (inputs and expected)."""
    members: dict[str, set[str]] = defaultdict(set)
    for pair in PAIRS:
        if pair["peer"] == peer and (peer, pair["input"]) not in NOT_ADOPTED:
            members[class_key(pair["expected"])] |= {pair["input"], pair["expected"]}
    return members


PEERS = sorted({pair["peer"] for pair in PAIRS})


def test_every_pair_is_measured() -> None:
    assert len(PAIRS) == 166
    assert PEERS == ["url-normalize", "w3lib"]
    assert sum(len(classes(peer)) for peer in PEERS) == 44 + 51


@pytest.mark.parametrize("peer", PEERS)
def test_no_false_merges(peer: str) -> None:
    classes_of: dict[str, set[str]] = defaultdict(set)
    for key, urls in classes(peer).items():
        for url in urls:
            normalised = normalise(url)
            if normalised is not None:
                classes_of[normalised].add(key)
    merged = {url: keys for url, keys in classes_of.items() if len(keys) > 1}
    assert merged == {}


@pytest.mark.parametrize("peer", PEERS)
def test_missed_merges_are_the_listed_decisions(peer: str) -> None:
    missed = {
        (peer, key)
        for key, urls in classes(peer).items()
        if len({normalise(url) for url in urls}) > 1
    }
    assert missed == {entry for entry in MISSED_MERGES if entry[0] == peer}


def test_not_adopted_pairs_exist() -> None:
    pairs = {(pair["peer"], pair["input"]) for pair in PAIRS}
    assert pairs >= NOT_ADOPTED
