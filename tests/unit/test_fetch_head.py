"""The request's parts of a URL: the fast split of plain URLs gives yarl's parts."""

from __future__ import annotations

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from trawler.fetch import plain_url_parts, yarl_url_parts
from trawler.httpcodec import FetchError
from trawler.sitegen import Site, SiteSpec
from trawler.urls import normalise

_HOSTS = st.one_of(
    st.text(alphabet="aZz09.-_", max_size=8),
    st.sampled_from(["127.0.0.1", "127.1", "a.com.", "[::1]", "xn--bcher-kva.de", "u:p@a.com"]),
)
_PORTS = st.sampled_from(["", ":", ":0", ":1", ":80", ":443", ":080", ":8080", ":65535",
                          ":65536", ":99999", ":123456", ":x"])  # fmt: skip
_PATH = st.text(alphabet="/a.%7e?#[]@:!$&'()*+,;= é", max_size=10)


def _yarl(url: str) -> tuple | None:
    try:
        return yarl_url_parts(url)
    except (ValueError, FetchError):
        return None


@settings(max_examples=3000, deadline=None)
@given(st.sampled_from(["http", "https", "HTTP", "ftp"]), _HOSTS, _PORTS, _PATH)
@example("http", "a.com", ":80", "/x?")
@example("https", "a.com", ":443", "?q")
@example("http", "a.com.", "", "/")
@example("http", "A.com", "", "/")
def test_plain_url_parts_are_yarls(scheme: str, host: str, port: str, rest: str) -> None:
    url = f"{scheme}://{host}{port}{rest}"
    fast = plain_url_parts(url)
    if fast is not None:
        assert fast == _yarl(url)


@pytest.mark.parametrize(
    "url",
    [
        *Site(SiteSpec(hosts=2, pages=3)).seeds(),
        "http://127.0.0.1:8800/p/1.html",
        "https://example.com/a/b?x=1&y=%20",
        "http://example.com:8080/",
        normalise("HTTP://Example.COM:80/a/./b/../c?q=1#frag") or "",
    ],
)
def test_urls_as_the_crawl_writes_them_take_the_fast_split(url: str) -> None:
    assert plain_url_parts(url) is not None
    assert plain_url_parts(url) == yarl_url_parts(url)
