"""The web-platform-tests URL suite (tests/data/conformance/wpt_urltestdata.json)
on Trawler's link path: an href resolved by ``resolve.Resolver`` (what
``parse_html`` does for ``<a href>``), then ``urls.Normaliser``; a ``Location``
header through ``fetch._redirect_target``; a seed through ``normalise``.

Selection (the cases a crawler meets), 445 cases:

- every case whose base is an http(s) URL, with any input, whose expected
  result is a failure or an http(s) URL (166); and
- every case without a base whose input is an absolute http(s) URL, i.e. starts
  (after leading C0 controls and spaces) with ``http:`` or ``https:`` (279).

The 36 cases with an http(s) base whose result has another scheme (``ftp:``,
``mailto:``, ``foo:`` ...) are checked apart: such a link is dropped.
The issue counted 425 cases and 348 passes with a selection it did not spell
out. On this selection the code before this change passed 359 of 445 on the
link and seed paths (346 if the two documented exceptions below, same-document
hrefs and hosts that are no DNS name, are counted as misses) and 114 of 166
on the ``Location`` path.

Expected value: ``None`` where the suite expects failure, else the suite's
``href`` with Trawler's documented normalisations applied to its components:

- userinfo and fragment dropped;
- one trailing dot of the host removed; a host that is not a DNS name
  (labels of letters, digits, ``-``, ``_``, 1-63 octets, 253 in all) or an IP
  address is no link (None): no resolver can look it up;
- path and query: percent-encoded unreserved characters decoded, hex digits
  uppercased, characters RFC 3986 does not allow there (``|^[]{}`` ...) encoded;
- query: empty parameters and tracking parameters dropped, parameters sorted by
  key (stable), an empty query dropped;
- an empty or fragment-only href is a reference to the same document, not a
  link: None (``test_non_http_and_fragment_only_hrefs_are_dropped``); as a
  ``Location`` it names the page itself.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from urllib.parse import quote

import pytest

from trawler.config import DEFAULT_TRACKING_PARAMS
from trawler.fetch import _redirect_target
from trawler.httpcodec import FetchError
from trawler.records import FetchResult
from trawler.resolve import Resolver
from trawler.urls import Normaliser

_DATA = Path(__file__).parent.parent / "data" / "conformance" / "wpt_urltestdata.json"
_CASES = [case for case in json.loads(_DATA.read_text("utf-8")) if isinstance(case, dict)]
_C0_AND_SPACE = "".join(map(chr, range(0x21)))
_SCHEME = re.compile(r"[\x00-\x20]*([A-Za-z][A-Za-z0-9+.-]*):")
_UNRESERVED = set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")
_PATH_ALLOWED = _UNRESERVED | set("!$&'()*+,;=:@/")
_QUERY_ALLOWED = (_PATH_ALLOWED - {"'"}) | {"?"}
_DNS_NAME = re.compile(r"(?:[a-z0-9_-]{1,63}\.)*[a-z0-9_-]{1,63}")
_TRACKING_EXACT = {p for p in DEFAULT_TRACKING_PARAMS if not p.endswith("*")}
_TRACKING_PREFIXES = tuple(p[:-1] for p in DEFAULT_TRACKING_PARAMS if p.endswith("*"))


def _scheme(url: str | None) -> str | None:
    match = _SCHEME.match(url or "")
    return match.group(1).lower() if match else None


def _http_base(case: dict) -> bool:
    return _scheme(case["base"]) in ("http", "https")


def _http_result(case: dict) -> bool:
    return bool(case.get("failure")) or case["protocol"] in ("http:", "https:")


def _selected(case: dict) -> bool:
    if _http_base(case):
        return _http_result(case)
    return case["base"] is None and _scheme(case["input"]) in ("http", "https")


def _case_id(case: dict) -> str:
    return f"{case['input']!r} on {case['base']!r}"


def _percent_normalised(text: str, allowed: set[str]) -> str:
    out, i = [], 0
    while i < len(text):
        pair = text[i + 1 : i + 3]
        if text[i] == "%" and re.fullmatch(r"[0-9A-Fa-f]{2}", pair):
            char = chr(int(pair, 16))
            out.append(char if char in _UNRESERVED else "%" + pair.upper())
            i += 3
            continue
        out.append(text[i] if text[i] in allowed else quote(text[i], safe=""))
        i += 1
    return "".join(out)


def _tracking(param: str) -> bool:
    key = param.partition("=")[0].lower()
    return key in _TRACKING_EXACT or key.startswith(_TRACKING_PREFIXES)


def _same_document(case: dict) -> bool:
    href = case["input"].strip(_C0_AND_SPACE).translate({9: None, 10: None, 13: None})
    return case["base"] is not None and (not href or href.startswith("#"))


def expected(case: dict, same_document_is_link: bool = False) -> str | None:
    """The suite's answer with Trawler's normalisations (module docstring)."""
    if case.get("failure") or not _http_result(case):
        return None
    if _same_document(case) and not same_document_is_link:
        return None
    host = case["hostname"].removesuffix(".")
    if not host.startswith("[") and (len(host) > 253 or not _DNS_NAME.fullmatch(host)):
        return None
    port = f":{case['port']}" if case["port"] else ""
    path = _percent_normalised(case["pathname"], _PATH_ALLOWED)
    query = _percent_normalised(case["search"][1:], _QUERY_ALLOWED)
    params = [p for p in query.split("&") if p and not _tracking(p)]
    params.sort(key=lambda p: p.partition("=")[0])
    query = "?" + "&".join(params) if params else ""
    return f"{case['protocol']}//{host}{port}{path}{query}"


SELECTED = [case for case in _CASES if _selected(case)]
WITH_BASE = [case for case in SELECTED if case["base"] is not None]
WITHOUT_BASE = [case for case in SELECTED if case["base"] is None]
OTHER_SCHEMES = [case for case in _CASES if _http_base(case) and not _http_result(case)]
_normalise = Normaliser()


def test_selection_size() -> None:
    assert (len(WITH_BASE), len(WITHOUT_BASE), len(OTHER_SCHEMES)) == (166, 279, 36)


@pytest.mark.parametrize("case", WITH_BASE, ids=_case_id)
def test_href_resolves_as_browsers_do(case: dict) -> None:
    link = Resolver(case["base"]).resolve(case["input"])
    assert (link and _normalise(link)) == expected(case)


@pytest.mark.parametrize("case", WITH_BASE, ids=_case_id)
def test_location_resolves_as_browsers_do(case: dict) -> None:
    result = FetchResult(url=case["base"], final_url=case["base"])
    try:
        target = _normalise(_redirect_target(result, case["input"], set(), 20))
    except FetchError as exc:
        assert exc.code == "bad_redirect"
        target = None
    # A Location of "" or "#x" names the page itself (the fetcher reports a loop).
    assert target == expected(case, same_document_is_link=True)


@pytest.mark.parametrize("case", WITHOUT_BASE, ids=_case_id)
def test_absolute_url_parses_as_browsers_do(case: dict) -> None:
    assert _normalise(case["input"]) == expected(case)


@pytest.mark.parametrize("case", OTHER_SCHEMES, ids=_case_id)
def test_href_to_another_scheme_is_dropped(case: dict) -> None:
    assert Resolver(case["base"]).resolve(case["input"]) is None
