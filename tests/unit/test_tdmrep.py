"""Reuse reservations, pure (trawler/tdmrep.py): the three TDMRep sources, their order,
tdmrep.json's location patterns and errors, and robots.txt's AI crawlers' groups."""

from __future__ import annotations

import json

import pytest

from trawler.config import CrawlConfig
from trawler.outcome import page_outcome
from trawler.records import CrawlRequest, FetchResult
from trawler.tdmrep import (
    AI_AGENTS,
    NO_GROUPS,
    NONE,
    SOURCE_FILE,
    SOURCE_HEADER,
    SOURCE_META,
    AiGroups,
    Reservation,
    TdmRepError,
    ai_groups,
    file_reservation,
    header_reservation,
    meta_reservation,
    parse_tdmrep,
)

POLICY = "https://example.org/policy.json"
RULES = json.dumps([
    {"location": "/open/*", "tdm-reservation": 0},
    {"location": "/shop/*.pdf$", "tdm-reservation": 1, "tdm-policy": POLICY},
    {"location": "/news/", "tdm-reservation": 1},
    {"location": "/news/archive/", "tdm-reservation": 0},  # shadowed: the first match wins
]).encode()  # fmt: skip


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("/open/a", Reservation(False, None, SOURCE_FILE)),
        ("/shop/a/b.pdf", Reservation(True, POLICY, SOURCE_FILE)),
        ("/shop/a/b.pdf?x=1", NONE),  # "$": the path must end there
        ("/shop/a.html", NONE),
        ("/news/archive/1", Reservation(True, None, SOURCE_FILE)),
        ("/", NONE),
    ],
)
def test_file_rules_match_paths_as_robots_txt_does(path: str, expected: Reservation) -> None:
    assert file_reservation(parse_tdmrep(RULES), "http://h.example" + path) == expected


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (b"{not json", "not JSON"),
        (b'{"location": "/"}', "not a JSON array"),
        (b'[{"location": "/", "tdm-reservation": 2}]', "must be 0 or 1"),
        (b'[{"location": "/", "tdm-reservation": "1"}]', "must be 0 or 1"),
        (b'[{"location": "x", "tdm-reservation": 1}]', "location must be a path"),
        (b'[{"location": "/", "tdm-reservation": 1, "tdm-policy": 3}]', "tdm-policy"),
        (b"[1]", "not an object"),
        (b"\xff\xfe", "not JSON"),
    ],
)
def test_malformed_files_are_refused_in_one_line(body: bytes, message: str) -> None:
    with pytest.raises(TdmRepError) as raised:
        parse_tdmrep(body)
    assert message in str(raised.value) and "\n" not in str(raised.value)


def test_headers_and_meta_state_a_reservation_only_with_0_or_1() -> None:
    headers = [("TDM-Reservation", " 1"), ("tdm-policy", POLICY)]
    assert header_reservation(headers) == Reservation(True, POLICY, SOURCE_HEADER)
    assert header_reservation([("tdm-reservation", "0")]) == Reservation(False, None, "header")
    assert header_reservation([("tdm-reservation", "yes"), ("tdm-policy", POLICY)]) == NONE
    assert header_reservation([("tdm-policy", POLICY)]) == NONE  # a policy alone reserves nothing
    assert meta_reservation("1", POLICY) == Reservation(True, POLICY, SOURCE_META)
    assert meta_reservation(None, POLICY) == NONE


def _page(body: str, headers: list[tuple[str, str]], content_type: str = "text/html"):
    url = "http://h.example/a"
    request = CrawlRequest(url, 0, None, "h.example")
    result = FetchResult(url, url, 200, headers, content_type, None, body.encode())
    return page_outcome(request, result, CrawlConfig(), "trawler").page


def test_a_pages_meta_comes_before_its_headers() -> None:
    meta = '<html><head><meta name="tdm-reservation" content="0"></head><body>x</body></html>'
    page = _page(meta, [("tdm-reservation", "1")])
    assert (page.tdm_reservation, page.tdm_source) == (False, SOURCE_META)
    page = _page("<p>no meta</p>", [("tdm-reservation", "1"), ("tdm-policy", POLICY)])
    assert (page.tdm_reservation, page.tdm_policy, page.tdm_source) == (True, POLICY, "header")
    pdf = _page("%PDF-1.7", [("tdm-reservation", "1")], "application/pdf")
    assert (pdf.error, pdf.tdm_reservation) == ("not_html", True)  # any resource's headers
    plain = _page("<p>nothing said</p>", [])
    assert (plain.tdm_reservation, plain.tdm_policy, plain.tdm_source) == (None, None, None)


ROBOTS = b"""User-agent: *
Disallow: /private

User-agent: GPTBot
User-agent: ccbot
Disallow: /

User-agent: ClaudeBot
Disallow: /drafts

# anthropic-ai is only named in this comment
"""


def test_ai_groups_name_the_crawlers_with_a_group_and_those_kept_off_root() -> None:
    groups = ai_groups(ROBOTS)
    assert groups == AiGroups(("GPTBot", "CCBot", "ClaudeBot"), ("GPTBot", "CCBot"))
    assert ai_groups(b"User-agent: *\nDisallow: /\n") == NO_GROUPS  # "*" names none of them
    assert ai_groups(b"") == NO_GROUPS
    assert len(set(AI_AGENTS)) == len(AI_AGENTS)
