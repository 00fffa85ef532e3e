"""protego's own test queries (385 can_fetch / crawl_delay / sitemaps answers) against
trawler.robots: every one passes except those listed below, each with its reason.

The agent of a query is handled as Trawler handles its --user-agent: a full
User-Agent string or a bare name, reduced to its product token (robots.py).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from trawler import robots

SUITE = Path(__file__).parent.parent / "data" / "conformance" / "protego_cases.json"
CASES: list[dict[str, Any]] = json.loads(SUITE.read_text(encoding="utf-8"))["cases"]

_WHOLE_TOKEN = (
    "RFC 9309 §2.2.1: a group applies when its user-agent names our product token, "
    "matched whole and case-insensitively; protego takes the longest group name that "
    "is a prefix of the agent"
)
_INDEX_HTML = (
    "documented Trawler choice (robots.py): Google's 'Allow: /dir/index.html also allows "
    "/dir/' is not applied; RFC 9309 §2.2.2 says the path must match the rule"
)
_DOLLAR = (
    "RFC 9309 §2.2.3: a trailing '$' ends the pattern, so 'Disallow: /x/abc$' matches "
    "only the path /x/abc; a literal '$' is written %24 (protego tries both readings)"
)
# (test, agent, url) → why Trawler answers differently from protego.
DIFFERENT: dict[tuple[str, str | None, str | None], str] = {
    ("test_generosity", "harry potter", "http://foo.bar/horcrux"): (
        "documented Trawler choice (robots.py, after Google): a line without a colon is read "
        "only when it has exactly two words, so 'user agent harry potter' is no line; and "
        "'harry potter' is no product token (RFC 9309 §2.2.1: no spaces)"
    ),
    ("test_generosity", "foobot", "http://foo.bar/myprofile"): (
        "RFC 9309 §2.2.1: '*' is special only as the whole user-agent value; 'foo*bot' "
        "names the product 'foo', not a pattern that matches 'foobot'"
    ),
    ("test_index_html_is_directory", "footbot", "http://foo.com/allowed-slash/"): _INDEX_HTML,
    ("test_special_symbols_dual_behaviour", "FooBot", "http://foo.bar/x/abc$"): _DOLLAR,
    ("test_special_symbols_dual_behaviour", "FooBot", "http://foo.bar/x/abc%24"): _DOLLAR,
    ("test_with_absolute_urls", "FooBot", "http://foo.bar/http://ms-web00.walkerplus.com/"): (
        "RFC 9309 §2.2 (ABNF): a rule's value is a path pattern starting with '/'; "
        "'Disallow: http://…' matches no path; protego reads it as '/http://…'"
    ),
    ("test_user_agent_precedence[/group1-hedwig-news2]", "hedwig-news2", "/group1"): _WHOLE_TOKEN,
    ("test_user_agent_precedence[/group3-hedwig-new]", "hedwig-new", "/group2"): _WHOLE_TOKEN,
    ("test_user_agent_precedence[/group3-hedwig-new]", "hedwig-new", "/group3"): _WHOLE_TOKEN,
    ("test_user_agent_precedence[/group3-hedwig-images]", "hedwig-images", "/group2"): (
        _WHOLE_TOKEN
    ),
    ("test_user_agent_precedence[/group3-hedwig-images]", "hedwig-images", "/group3"): (
        _WHOLE_TOKEN
    ),
}
PASSING = len(CASES) - len(DIFFERENT)  # 374 of 385 (362 before the token fix)


def _key(case: dict[str, Any]) -> tuple[str, str | None, str | None]:
    return case["test"].rpartition("::")[2], case.get("agent"), case.get("url")


def trawler_answer(case: dict[str, Any]) -> Any:
    rules = robots.parse(case["content"], case.get("agent") or "*")
    if case["q"] == "can_fetch":
        return rules.allowed(case["url"])
    if case["q"] == "crawl_delay":
        return rules.crawl_delay
    return rules.sitemaps


def test_suite_is_whole() -> None:
    assert len(CASES) == 385
    keys = [_key(case) for case in CASES]
    assert all(keys.count(key) == 1 for key in DIFFERENT), "a listed case is ambiguous"
    assert set(DIFFERENT) <= set(keys), "a listed case is not in the suite"


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{_key(c)[0]}-{c.get('agent')}")
def test_protego_case(case: dict[str, Any]) -> None:
    got = trawler_answer(case)
    reason = DIFFERENT.get(_key(case))
    if reason is None:
        assert got == case["result"], case["content"]
    else:  # the list stays true: a listed case that starts to agree must leave it
        assert got != case["result"], f"now agrees with protego; unlist it ({reason})"


def test_pass_count() -> None:
    assert sum(trawler_answer(case) == case["result"] for case in CASES) == PASSING == 374
