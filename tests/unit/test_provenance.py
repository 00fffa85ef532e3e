"""Provenance rows (provenance.py): what the link filter lists as left out, the
rows a page's discovery makes, and the bound on skips recorded again."""

from __future__ import annotations

from trawler.linkfilter import LinkFilter
from trawler.provenance import (
    LINK,
    SITEMAP,
    Found,
    SkipsKept,
    describe,
    found_via,
    trap_rule,
)
from trawler.records import Link
from trawler.scope import Scope, TrapRules
from trawler.urls import Normaliser

HOME = "http://a.test/"


def link_filter(max_depth: int | None = None) -> LinkFilter:
    scope = Scope.from_hosts("host", ["a.test"], exclude=[r"\.pdf$"])
    return LinkFilter(Normaliser(), scope, TrapRules(), max_depth, _robots)


def _robots(url: str) -> bool:
    return "/private/" not in url


def test_the_filter_lists_each_link_left_out_with_its_reason_and_anchor() -> None:
    links = [Link("http://a.test/ok", anchor="Fine"), Link("http://b.test/x", anchor="Away"),
             Link("http://a.test/doc.pdf"), Link("http://a.test/a/b/a/b/a/b/a/b/a/b"),
             Link("http://a.test/private/p", anchor="Secret"),
             Link("http://a.test/nf", nofollow=True, anchor="No"),
             Link("http://b.test/x", anchor="Away again")]  # fmt: skip
    filt = link_filter()
    requests = filt.requests_for(links, HOME, 1)
    assert [r.url for r in requests] == ["http://a.test/ok"] and filt.anchors == ["Fine"]
    assert filt.skipped == [
        ("http://b.test/x", "out_of_scope", "Away"),
        ("http://a.test/doc.pdf", "out_of_scope", None),
        ("http://a.test/a/b/a/b/a/b/a/b/a/b", "repeated_segments", None),
        ("http://a.test/private/p", "robots", "Secret"),
        ("http://a.test/nf", "nofollow", "No"),
    ]  # a URL once a page
    assert filt.rejected["out_of_scope"] == 2 and filt.rejected["nofollow"] == 1


def test_links_past_the_depth_are_listed_but_not_counted() -> None:
    filt = link_filter(max_depth=1)
    links = [Link("http://a.test/x", anchor="X"), Link("http://a.test/x"), Link("/bad")]
    assert filt.requests_for(links, HOME, 2) == []
    assert filt.skipped == [("http://a.test/x", "max_depth", "X")] and not filt.rejected


def test_a_page_s_rows_admitted_and_left_out_once_a_job() -> None:
    filt = link_filter()
    admitted = filt.requests_for([Link("http://a.test/1", anchor="One")], HOME, 1)
    kept = SkipsKept()
    for _page in range(2):
        found = Found(HOME, {"http://a.test/1": "One"})
        found.skips.append(("http://b.test/", "out_of_scope", "B", LINK))
        found.left_out(admitted, [], "host_budget")
        rows = found.rows(admitted if _page == 0 else [], kept, lambda r, u: f"rule {r}")
        if _page == 0:
            assert rows == [
                ("http://a.test/1", HOME, LINK, "One", None, None),
                ("http://b.test/", HOME, LINK, "B", "out_of_scope", "rule out_of_scope"),
                ("http://a.test/1", HOME, LINK, "One", "host_budget", "rule host_budget"),
            ]
        else:
            assert rows == []  # the second page linking them records nothing again


def test_how_a_frontier_entry_was_found_and_the_words() -> None:
    assert found_via(None, "page") == "seed"
    assert found_via("http://a.test/robots.txt", "sitemap") == "robots.txt"
    assert found_via("http://a.test/sitemap.xml", "sitemap") == SITEMAP
    assert found_via(HOME, "page") == LINK
    assert trap_rule("session_id") == "a session id in the URL" and trap_rule("robots") is None
    report = {"url": HOME + "x", "decision": "skipped", "found_via": LINK, "parent_url": HOME,
              "anchor": None, "reason": "calendar", "detail": trap_rule("calendar"),
              "depth": 1}  # fmt: skip
    assert describe(report) == [
        "http://a.test/x: skipped, not fetched",
        "found: a link (no anchor text) on http://a.test/",
        "reason: a crawler trap (calendar): a calendar page more than 2 years ahead",
        "depth: 1",
    ]
