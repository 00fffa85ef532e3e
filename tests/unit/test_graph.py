"""The link graph's pure side: what the parser keeps of a link (anchor text, rel), and
a page's edges (graph.py) against the link filter's own verdicts."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from tests.unit.test_urls import url_like
from trawler.graph import page_edges
from trawler.linkfilter import LinkFilter
from trawler.parse import ANCHOR_MAX_CHARS, parse_html
from trawler.records import Link
from trawler.scope import Scope, TrapRules
from trawler.urls import Normaliser

PAGE = "http://a.test/dir/page"


def a_filter(max_depth: int | None = None) -> LinkFilter:
    scope = Scope.from_hosts("host", ["a.test"], [], [r"/excluded/"])
    return LinkFilter(Normaliser(("utm_*",)), scope, TrapRules(), max_depth, lambda _url: None)


def test_the_parser_keeps_each_links_text_and_rel() -> None:
    body = (
        '<a href="/a">  Harbour\n <b>pilot</b> </a><a href="/b" rel=" NoFollow\tUGC "></a>'
        '<map><area href="/c" alt=" Map  C "><area href="/d"></map>'
        f'<a href="/e">{"x" * (ANCHOR_MAX_CHARS + 10)}</a>'
    ).encode()
    links = parse_html(body, PAGE).links
    assert [(link.anchor, link.rel, link.nofollow) for link in links] == [
        ("Harbour pilot", None, False),
        (None, "nofollow ugc", True),
        ("Map C", None, False),
        (None, None, False),
        ("x" * ANCHOR_MAX_CHARS, None, False),
    ]


def test_edges_once_per_page_with_the_filters_reasons() -> None:
    links = [
        Link("http://a.test/x?utm_source=feed", anchor="X"),
        Link("http://a.test/x", anchor="X"),  # the same URL, normalised: one edge
        Link("http://a.test/x", anchor="Another X"),
        Link("http://a.test/x", anchor="X", rel="next"),
        Link("http://a.test/n", nofollow=True, rel="nofollow"),
        Link("http://b.test/", anchor="B"),
        Link("http://a.test/excluded/1"),
        Link("http://a..b/", anchor="Bad"),
    ]
    assert page_edges(links, a_filter(), 1, nofollow=False) == [
        ("http://a.test/x", fp("http://a.test/x"), "X", None, None),
        ("http://a.test/x", fp("http://a.test/x"), "Another X", None, None),
        ("http://a.test/x", fp("http://a.test/x"), "X", "next", None),
        ("http://a.test/n", fp("http://a.test/n"), None, "nofollow", "nofollow"),
        ("http://b.test/", fp("http://b.test/"), "B", None, "out_of_scope"),
        ("http://a.test/excluded/1", fp("http://a.test/excluded/1"), None, None, "out_of_scope"),
        ("http://a..b/", None, "Bad", None, "bad_url"),
    ]
    assert {edge[4] for edge in page_edges(links[:3], a_filter(0), 1, False)} == {"depth"}
    assert {edge[4] for edge in page_edges(links[:3], a_filter(), 1, True)} == {"nofollow"}


def fp(url: str) -> int:
    from trawler.dedup import url_fingerprint

    return url_fingerprint(url)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(url_like(), st.booleans(), st.sampled_from(["A", "B", None])),
                max_size=30))  # fmt: skip
def test_admitted_edges_are_the_filters_requests(found: list[tuple[str, bool, str | None]]) -> None:
    """The edges the filter admitted name exactly the URLs it turns into requests."""
    links = [Link(url, nofollow, anchor) for url, nofollow, anchor in found]
    requests = a_filter().requests_for(links, PAGE, 1)
    edges = page_edges(links, a_filter(), 1, nofollow=False)
    admitted = [edge[0] for edge in edges if edge[4] is None]
    assert sorted(set(admitted)) == sorted(request.url for request in requests)
    keys = [(edge[0], edge[2], edge[3]) for edge in edges]
    assert len(keys) == len(set(keys))
