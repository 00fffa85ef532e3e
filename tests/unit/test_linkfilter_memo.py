"""The link filter's memo gives what the full path gives, and forgets what may change.

``LinkFilter.requests_for`` keeps, per link URL, what that URL alone decides
(normalised URL, host, fingerprint, trap verdict); scope and robots.txt are asked
each time, since a crawl widens its scope and learns robots.txt as it goes. The
reference here is the filter's loop as it was before the memo: every link
normalised, its host, scope, traps, robots and fingerprint computed in full.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.unit.test_urls import url_like
from trawler import analysis
from trawler.config import CrawlConfig
from trawler.dedup import url_fingerprint
from trawler.linkfilter import LinkFilter
from trawler.records import CrawlRequest, Link
from trawler.scope import Scope, TrapRules
from trawler.urls import Normaliser, host_key

HOSTS = ["a.test", "b.test:8080", "127.0.1.1:8800"]


def full_path(links: LinkFilter, found: list[Link], parent: str, depth: int) -> tuple:
    """requests_for as it was: nothing remembered from one link to the next."""
    rejected: Counter[str] = Counter()
    out, batch_seen = [], set()
    for link in found:
        if link.nofollow:
            rejected["nofollow"] += 1
            continue
        url = links.normalise(link.url)
        if url is None:
            rejected["bad_url"] += 1
            continue
        if url in batch_seen:
            continue
        batch_seen.add(url)
        host = host_key(url)
        reason = links.reject_reason(url, host)
        if reason is not None:
            rejected[reason] += 1
            continue
        out.append(CrawlRequest(url, depth, parent, host, url_fingerprint(url)))
    return out, rejected


def memoised(links: LinkFilter, found: list[Link], parent: str, depth: int) -> tuple:
    links.rejected.clear()
    requests = links.requests_for(found, parent, depth)
    return requests, Counter(links.rejected)


def a_filter(memo_size: int = 1 << 16, robots: dict[str, bool] | None = None) -> LinkFilter:
    verdicts = robots if robots is not None else {}
    return LinkFilter(Normaliser(), Scope.from_hosts("host", HOSTS), TrapRules(), None,
                      lambda url: verdicts.get(url), memo_size=memo_size)  # fmt: skip


_LINK_URL = st.one_of(
    url_like(),
    st.builds(
        lambda host, path, query: f"http://{host}{path}{query}",
        st.sampled_from(["a.test", "A.TEST", "b.test:8080", "c.test", "127.0.1.1:8800"]),
        st.sampled_from(
            [
                "",
                "/",
                "/x/../y",
                "/2031/01/01/",
                "/a/a/a/a/a",
                "/cart;jsessionid=1",
                "/" + "z" * 2100,
                "/p/%7e",
            ]
        ),  # fmt: skip
        st.sampled_from(
            ["", "?utm_source=x&b=1&a=2", "?sid=3", "?" + "&".join(f"k{i}" for i in range(25))]
        ),
    ),
)
_LINKS = st.lists(st.builds(Link, _LINK_URL, st.booleans()), max_size=12)


@settings(max_examples=300, deadline=None)
@given(pages=st.lists(_LINKS, min_size=1, max_size=4), memo_size=st.sampled_from([0, 3, 1 << 16]))
def test_memo_gives_what_the_full_path_gives(pages: list[list[Link]], memo_size: int) -> None:
    """Pages seen in turn, each twice: hits, misses and evictions alike."""
    links, reference = a_filter(memo_size), a_filter()
    for found in pages + pages:
        want = full_path(reference, found, "http://a.test/", 2)
        assert memoised(links, found, "http://a.test/", 2) == want


def test_the_scope_and_robots_are_asked_again_for_a_known_link() -> None:
    robots: dict[str, bool] = {}
    links = a_filter(robots=robots)
    found = [Link("http://new.test/x"), Link("http://a.test/private")]
    assert memoised(links, found, "http://a.test/", 1) == (
        [CrawlRequest("http://a.test/private", 1, "http://a.test/", "a.test",
                      url_fingerprint("http://a.test/private"))],
        Counter(out_of_scope=1),
    )  # fmt: skip
    links.scope.add_host("new.test")  # a new seed widens the scope
    robots["http://a.test/private"] = False  # its robots.txt arrived
    requests, rejected = memoised(links, found, "http://a.test/", 1)
    assert [r.url for r in requests] == ["http://new.test/x"] and rejected == Counter(robots=1)


def test_memo_is_bounded_and_keeps_the_recently_used() -> None:
    links = a_filter(memo_size=4)
    normalised: list[str] = []
    normalise = links.normalise
    links.normalise = lambda url: normalised.append(url) or normalise(url)  # type: ignore[assignment]
    for n in range(10):
        links.digest(f"http://a.test/{n}")
        links.digest("http://a.test/nav")  # used on every page: never evicted
    assert len(links._digests) == 4  # noqa: SLF001 - the bound is the point
    assert normalised.count("http://a.test/nav") == 1
    links.digest("http://a.test/0")  # evicted long ago: computed again
    assert normalised.count("http://a.test/0") == 2


def test_jobs_alike_share_one_memo_in_a_parser_process(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A parser process serves many jobs: those whose links normalise alike share one
    memo (one bound in all), and each keeps its own scope."""
    monkeypatch.setattr(analysis, "_PROCESS_ANALYSERS", {})

    def setup(name: str, config: CrawlConfig, hosts: list[str]) -> tuple[str, str]:
        path = tmp_path / f"{name}.json"
        path.write_text(json.dumps({"config": config.model_dump_json(), "scope_hosts": hosts}))
        return name, str(path)

    a = analysis._analyser_for(setup("a", CrawlConfig(), ["a.test"])).links
    b = analysis._analyser_for(setup("b", CrawlConfig(), ["b.test"])).links
    other = CrawlConfig(strip_params=["sort"])
    c = analysis._analyser_for(setup("c", other, ["a.test"])).links
    found = [Link("http://a.test/x?sort=1"), Link("http://b.test/y")]
    assert [r.url for r in b.requests_for(found, "http://b.test/", 1)] == ["http://b.test/y"]
    assert a._digests is b._digests and c._digests is not a._digests  # noqa: SLF001
    assert [r.url for r in a.requests_for(found, "http://a.test/", 1)] == ["http://a.test/x?sort=1"]
    assert [r.url for r in c.requests_for(found, "http://a.test/", 1)] == ["http://a.test/x"]
