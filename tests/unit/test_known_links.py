"""Links the loop has taken already are left out by the parser processes
(knownlinks.py): the filter, the process's sets, and the pool with a real process."""

from __future__ import annotations

import asyncio

import pytest

from trawler import knownlinks
from trawler.analysis import AnalysisPool
from trawler.config import CrawlConfig
from trawler.dedup import url_fingerprint
from trawler.knownlinks import KnownNews, forget, known_of
from trawler.linkfilter import LinkFilter
from trawler.parsers import ParserProcesses
from trawler.records import CrawlRequest, FetchResult, Link
from trawler.scope import Scope, TrapRules
from trawler.urls import Normaliser

pytestmark = pytest.mark.timeout(120)
HOST = "a.test"
# Run in a parser process: how many runs' sets it holds.
HELD = "len(__import__('trawler.knownlinks').knownlinks._PROCESS_KNOWN)"


def fp(path: str) -> int:
    return url_fingerprint(f"http://{HOST}{path}")


def link_filter() -> LinkFilter:
    scope = Scope.from_hosts("host", [HOST])
    return LinkFilter(Normaliser(), scope, TrapRules(), None, lambda _url: None)


LINKS = [
    Link("http://a.test/one", anchor="one"),
    Link("http://a.test/two", anchor="two"),
    Link("http://a.test/two#again", anchor="two again"),
    Link("http://a.test/three", nofollow=True, anchor="three"),
    Link("http://b.test/out", anchor="out"),
]


@pytest.fixture(autouse=True)
def process_sets(monkeypatch: pytest.MonkeyPatch) -> None:
    """This process's sets, as a parser process's: none from other tests."""
    monkeypatch.setattr(knownlinks, "_PROCESS_KNOWN", {})


def test_known_links_are_left_out_and_nothing_else_changes() -> None:
    plain, told = link_filter(), link_filter()
    every = plain.requests_for(LINKS, "http://a.test/", 1)
    some = told.requests_for(LINKS, "http://a.test/", 1, {fp("/two"), fp("/three")})
    assert [r.url for r in every] == ["http://a.test/one", "http://a.test/two"]
    assert [r.url for r in some] == ["http://a.test/one"]
    assert told.anchors == ["one"]  # the requests' anchors, still one each
    # Counters and skips as before: a known URL linked nofollow is still a nofollow link.
    assert told.rejected == plain.rejected == {"nofollow": 1, "out_of_scope": 1}
    assert told.skipped == plain.skipped


def test_a_new_epoch_or_another_run_starts_with_nothing_known() -> None:
    run, other = KnownNews(), KnownNews()
    run.tell([1, 2], (0, 0))
    assert set(known_of(run.take())) == {1, 2}
    run.tell([3], (0, 0))
    assert set(known_of(run.take())) == {1, 2, 3}  # added to what the process holds
    assert set(known_of(other.take())) == set()  # another run (another job): its own
    run.tell([4], (1, 0))  # a robots.txt replaced: what was told before is void
    assert set(known_of(run.take())) == {4}
    run.tell([], (1, 1))  # the blocklist changed
    assert set(known_of(run.take())) == set()
    run.tell([5], (1, 0))  # verdicts taken before that change: void too
    assert set(known_of(run.take())) == set()
    assert known_of(None) == ()


def test_the_set_starts_over_past_its_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(knownlinks, "KNOWN_MAX", 4)
    monkeypatch.setattr(knownlinks, "KNOWN_MIN", 1)
    run = KnownNews()
    run.tell([1, 2, 3], (0, 0))
    assert len(known_of(run.take())) == 3
    run.tell([4, 5], (0, 0))
    assert set(known_of(run.take())) == {4, 5}


def test_the_runs_held_share_the_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(knownlinks, "KNOWN_MAX", 8)
    monkeypatch.setattr(knownlinks, "KNOWN_MIN", 2)
    first, second = KnownNews(), KnownNews()
    first.tell([1, 2, 3, 4, 5], (0, 0))
    assert len(known_of(first.take())) == 5  # alone: all 8 its own
    second.tell([9], (0, 0))
    assert set(known_of(second.take())) == {9}
    first.tell([6], (0, 0))  # two runs: 4 each
    assert set(known_of(first.take())) == {6}
    forget(first.token)  # its run ended: the other has them all again
    second.tell([10, 11, 12, 13, 14], (0, 0))
    assert len(known_of(second.take())) == 6


def test_each_process_is_sent_everything_told() -> None:
    """Batches go to whichever process is least busy: each learns every
    fingerprint, with the next batch it is sent, once."""
    run = KnownNews()
    run.tell([1, 2], (0, 0))
    assert run.take(0, 2)[2] == [1, 2]
    run.tell([3], (0, 0))
    assert run.take(0, 2)[2] == [3]
    assert run.take(1, 2)[2] == [1, 2, 3]  # its first batch: all of the epoch
    assert run.take(1, 2)[2] == run.take(0, 2)[2] == []
    run.tell([4], (0, 0))
    assert run.take(1, 2)[2] == [4]
    run.tell([5], (1, 0))  # a new epoch: each is sent only what came after
    assert run.take(0, 2)[1:] == (2, [5])
    assert run.take(1, 2)[1:] == (2, [5])


def test_news_kept_for_a_process_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    """A process sent no batch for long misses the oldest; what every process
    has been sent is not kept."""
    monkeypatch.setattr(knownlinks, "KNOWN_MAX", 3)
    run = KnownNews()
    run.tell([1, 2], (0, 0))
    assert run.take(0, 2)[2] == [1, 2]
    run.tell([3, 4, 5], (0, 0))
    assert run.take(1, 2)[2] == [3, 4, 5]  # the newest 3 at most
    assert run.take(0, 2)[2] == [3, 4, 5]
    run.tell([6], (0, 0))
    assert run.take(0, 2)[2] == run.take(1, 2)[2] == [6]
    for fp in range(7, 20):  # process 1 idle: what is kept for it stays under 2 × 3
        run.tell([fp], (0, 0))
        assert run.take(0, 2)[2] == [fp]
        assert len(run._fps) <= 6
    assert run.take(1, 2)[2] == [17, 18, 19]
    sent = run.take(0, 1)[2]
    run.tell([20], (0, 0))  # a list sent is not added to afterwards
    assert sent == []


def test_a_run_forgotten_starts_again() -> None:
    run = KnownNews()
    run.tell([1], (0, 0))
    assert set(known_of(run.take())) == {1}
    forget(run.token)
    assert set(known_of(run.take())) == set()


def home(*paths: str) -> tuple[CrawlRequest, FetchResult]:
    url = f"http://{HOST}/"
    links = "".join(f"<a href={path}>{path}</a>" for path in paths)
    body = f"<html><title>home</title>{links}</html>".encode()
    result = FetchResult(url, url, 200, content_type="text/html", body=body, raw_body=body)
    return CrawlRequest(url, 0, None, HOST, url_fingerprint(url)), result


async def requested(pool: AnalysisPool, *paths: str) -> list[str]:
    analysis = await pool.analyse(*home(*paths))
    return [request.url.removeprefix(f"http://{HOST}") for request in analysis.requests]


async def test_a_parser_process_leaves_out_what_its_run_was_told() -> None:
    """Two runs alike (same config, same scope: one setup in the process) on one
    parser process: each leaves out only what it was told itself."""
    parsers = ParserProcesses(1)
    run, twin = AnalysisPool(CrawlConfig(), 1, parsers), AnalysisPool(CrawlConfig(), 1, parsers)
    run.start([HOST])
    twin.start([HOST])
    try:
        assert await requested(run, "/a", "/b", "/c") == ["/a", "/b", "/c"]
        run.tell_known([fp("/a"), fp("/b")], (0, 0))
        assert await requested(run, "/a", "/b", "/c") == ["/c"]
        assert await requested(twin, "/a", "/b", "/c") == ["/a", "/b", "/c"]
        run.tell_known([], (1, 0))  # a robots.txt replaced
        assert await requested(run, "/a", "/b", "/c") == ["/a", "/b", "/c"]
        assert await parsers.submit(eval, HELD) == 2
        run.close()  # its set is dropped; the twin's stays
        assert await parsers.submit(eval, HELD) == 1
    finally:
        run.close()
        twin.close()
        parsers.close()


async def test_every_parser_process_leaves_out_what_the_run_was_told() -> None:
    """Two parser processes: a batch goes to the least busy one, and each leaves out
    every link told, whichever process the batch that followed the telling went to."""
    parsers = ParserProcesses(2)
    run = AnalysisPool(CrawlConfig(), 2, parsers)
    run.start([HOST])
    try:
        await asyncio.gather(*parsers.submit_to_each(eval, "0"))  # both warm, both idle
        run.tell_known([fp("/a")], (0, 0))
        assert await requested(run, "/a", "/b", "/c") == ["/b", "/c"]  # to process 0
        run.tell_known([fp("/b")], (0, 0))
        # Two batches at once: the first to process 0, the second to process 1.
        first = asyncio.ensure_future(requested(run, "/a", "/b", "/c"))
        await asyncio.sleep(0)
        run._submit()
        second = asyncio.ensure_future(requested(run, "/a", "/b", "/d"))
        await asyncio.sleep(0)
        run._submit()
        assert await first == ["/c"]
        assert await second == ["/d"]
        assert [await parsers.submit_to(slot, eval, HELD) for slot in (0, 1)] == [1, 1]
    finally:
        run.close()
        parsers.close()


async def test_inline_analysis_is_told_nothing() -> None:
    """--parse-processes 0: the loop's own analyser, every link as before."""
    pool = AnalysisPool(CrawlConfig(), 0)
    pool.start([HOST])
    pool.tell_known([fp("/a")], (0, 0))
    assert await requested(pool, "/a", "/b") == ["/a", "/b"]
    pool.close()
