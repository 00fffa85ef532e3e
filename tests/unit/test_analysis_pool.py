"""The parser processes get the config once, at start, not with every batch."""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import os
import signal
import sys
import time
import types
from collections import Counter
from pathlib import Path

import pytest

from trawler import analysis, parsers
from trawler.analysis import AnalysisPool
from trawler.config import CrawlConfig
from trawler.dedup import url_fingerprint
from trawler.parserpipe import _READ_BYTES, PIPE_BYTES, ParserBroken, dumps_answer, loads_answer
from trawler.parsers import ParserProcesses
from trawler.records import CrawlRequest, FetchResult, Link

pytestmark = pytest.mark.timeout(120)
PAGES = 300
SITEMAP_NS = "http://www.sitemaps.org/schemas/sitemap/0.9"
F_GETPIPE_SZ = getattr(fcntl, "F_GETPIPE_SZ", 1032)  # Linux
BIG_USER_AGENT = "Bot/1.0 " + "x" * 8_000_000  # an 8 MB config, as 1 M seeds made it bigger


def page(i: int) -> tuple[CrawlRequest, FetchResult]:
    url = f"http://a.test/{i}"
    body = f"<html><title>{i}</title><a href=/{i + 1}>next</a></html>".encode()
    result = FetchResult(url, url, 200, content_type="text/html", body=body, raw_body=body)
    return CrawlRequest(url, 0, None, "a.test", url_fingerprint(url)), result


async def analyse_one_at_a_time(config: CrawlConfig) -> float:
    """Pages sent one after another: every page is a batch of its own."""
    pool = AnalysisPool(config, 1)
    pool.start(["a.test"])
    try:
        await pool.analyse(*page(0))  # the process is up: not part of the time
        started = time.monotonic()
        for i in range(1, PAGES):
            analysis = await pool.analyse(*page(i))
            assert analysis.outcome.page.title == str(i)
        return time.monotonic() - started
    finally:
        pool.close()


def test_batches_do_not_carry_the_config() -> None:
    """Before: each batch pickled the config (8 MB here) to the process: seconds more."""
    small = asyncio.run(analyse_one_at_a_time(CrawlConfig()))
    big = asyncio.run(analyse_one_at_a_time(CrawlConfig(user_agent=BIG_USER_AGENT)))
    assert big < small + 1.5, (small, big)


def linking_page(host: str, *hrefs: str) -> tuple[CrawlRequest, FetchResult]:
    url = f"http://{host}/"
    links = "".join(f"<a href={href}>x</a>" for href in hrefs)
    body = f"<html><title>{host}</title>{links}</html>".encode()
    result = FetchResult(url, url, 200, content_type="text/html", body=body, raw_body=body)
    return CrawlRequest(url, 0, None, host, url_fingerprint(url)), result


async def test_jobs_share_the_processes_each_with_its_own_scope() -> None:
    """Two jobs (scopes a.test, b.test) on one parser process: each page is analysed
    with its own job's setup, batch after batch, whichever job came first."""
    parsers = ParserProcesses(1)
    job_a = AnalysisPool(CrawlConfig(), 1, parsers)
    job_b = AnalysisPool(CrawlConfig(user_agent="Other/1.0"), 1, parsers)
    job_a.start(["a.test"])
    job_b.start(["b.test"])
    try:
        for _ in range(3):
            found = await asyncio.gather(
                job_a.analyse(*linking_page("a.test", "http://b.test/x", "/y")),
                job_b.analyse(*linking_page("b.test", "http://a.test/z", "/w")),
            )
            urls = [[r.url for r in analysis.requests] for analysis in found]
            assert urls == [["http://a.test/y"], ["http://b.test/w"]]
        assert parsers.processes == 1
    finally:
        job_a.close()
        job_b.close()
        parsers.close()


async def test_a_page_that_kills_its_parser_process_costs_that_page_only(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Under the pre-parse bound (htmlbound.py) but ~0.4 s of lexbor: past a 0.1 s CPU
    limit SIGPROF ends the parser process mid-batch. The other pages of the batch are
    parsed again, the costly one is recorded as such, and the next pages find a new
    process."""
    costly = ("<body>" + "<div>" * 4000 + "<div></div>" * 45_000).encode()
    pool = AnalysisPool(CrawlConfig(parse_time_limit_s=0.1), 1)
    pool.start(["a.test"])
    try:
        request, result = page(0)
        result.body = costly
        batch = [page(1), (request, result), page(2)]
        found = await asyncio.gather(*(pool.analyse(*each) for each in batch))
        assert [a.outcome.page.error for a in found] == [None, "parse_too_complex", None]
        assert [a.outcome.page.title for a in found] == ["1", None, "2"]
        assert "crashed in a parser process" in caplog.text  # it did die
        after = await asyncio.wait_for(pool.analyse(*page(3)), 30)
        assert after.outcome.page.title == "3"
        assert [r.url for r in after.requests] == ["http://a.test/4"]
    finally:
        pool.close()


async def test_the_cpu_limit_is_told_by_how_the_process_ended_not_by_the_clock() -> None:
    """The suspect's process ends by SIGPROF: over the limit, however soon the crawl
    process saw it. Before, a break sooner in wall time than the limit was called a
    crash; here the crawl process's limit is 100 s (the parser's, from the job's
    setup, stays 0.1 s), and the old rule said parse_crash (CI saw it at 0.1 s)."""
    costly = ("<body>" + "<div>" * 4000 + "<div></div>" * 45_000).encode()
    pool = AnalysisPool(CrawlConfig(parse_time_limit_s=0.1), 1)
    pool.start(["a.test"])
    pool.config = CrawlConfig(parse_time_limit_s=100)
    try:
        request, result = page(0)
        result.body = costly
        found = await pool._analyse_alone(request, result)
        assert found.outcome.page.error == "parse_too_complex"
    finally:
        pool.close()


async def test_a_parser_process_killed_otherwise_is_a_crash_with_its_exit_code(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Any other end (here SIGSEGV, as a crash in lexbor would be) is parse_crash,
    and the log names how the process ended."""
    pool = AnalysisPool(CrawlConfig(parse_time_limit_s=30), 1)
    pool.start(["a.test"])
    try:
        analysing = asyncio.ensure_future(pool._analyse_alone(*page(0)))
        await asyncio.sleep(0)  # the suspects' process is started
        assert pool._alone is not None
        os.kill(pool._alone.process.pid, signal.SIGSEGV)
        found = await asyncio.wait_for(analysing, 30)
        assert found.outcome.page.error == "parse_crash"
        assert f"exit code {-signal.SIGSEGV}" in caplog.text
        after = await asyncio.wait_for(pool._analyse_alone(*page(1)), 30)  # a new process
        assert after.outcome.page.title == "1"
    finally:
        pool.close()


def _analysers_in_process() -> list[str]:
    """Run in a parser process: the jobs whose analysers it has built."""
    from trawler import analysis

    return sorted(analysis._PROCESS_ANALYSERS)


async def test_the_processes_are_ready_for_the_job_before_its_first_page() -> None:
    """start() has each process read the job's setup and analyse a first page at once:
    the crawl's first pages (2,000 home pages in the benchmark) no longer wait behind
    the process's imports and the setup's build. Before, a process had built nothing
    until the first batch of pages reached it."""
    parsers = ParserProcesses(2)
    pool = AnalysisPool(CrawlConfig(), 2, parsers)
    pool.start(["a.test"])
    try:
        key, _path = parsers.register(pool.config_json, ["a.test"])  # the job's setup
        # A process answers in order: asked now, it has done whatever start() sent first.
        asked = [parsers.submit(_analysers_in_process) for _ in range(2)]
        built = await asyncio.wait_for(asyncio.gather(*asked), 60)
        assert built == [[key], [key]]  # before: [[], []]
    finally:
        pool.close()
        parsers.close()


def sitemap(host: str, count: int) -> tuple[CrawlRequest, FetchResult]:
    url = f"http://{host}/sitemap.xml"
    entries = "".join(
        f"<url><loc>http://{host}/p/{i}.html</loc><lastmod>2026-11-{1 + i % 28:02d}</lastmod>"
        f"<changefreq>{('daily', 'weekly')[i % 2]}</changefreq></url>"
        for i in range(count)
    )
    body = f'<?xml version="1.0"?><urlset xmlns="{SITEMAP_NS}">{entries}</urlset>'.encode()
    result = FetchResult(url, url, 200, content_type="application/xml", body=body, raw_body=body)
    request = CrawlRequest(url, 1, f"http://{host}/robots.txt", host, url_fingerprint(url),
                           kind="sitemap")  # fmt: skip
    return request, result


async def test_small_sitemaps_are_read_in_a_parser_process_large_ones_on_a_thread(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Small sitemaps go to the parser process (read on a thread of the crawl process,
    2,000 of them held its GIL for seconds at the start); one past the bound is read on
    a thread, where the crawl process's own code runs: made to fail here, it shows
    which sitemap took which path."""
    pool = AnalysisPool(CrawlConfig(), 1)
    pool.start(["a.test"])
    expected = analysis.analyse_sitemap(pool.analyser, *sitemap("a.test", 40))

    def in_this_process(*_args: object) -> None:
        raise RuntimeError("read in the crawl process")

    monkeypatch.setattr(analysis, "analyse_sitemap", in_this_process)
    try:
        small = await pool.analyse_sitemap(*sitemap("a.test", 40))
        assert small.listed == expected.listed == 40
        assert {(r.lastmod is not None, r.changefreq) for r in small.requests} == {
            (True, "daily"),
            (True, "weekly"),
        }
        assert small.requests == expected.requests  # every field, <changefreq> included
        assert (small.counters, small.rejected) == (expected.counters, expected.rejected)
        large = sitemap("a.test", analysis.SITEMAP_IN_PROCESS_MAX_BYTES // 40)
        assert len(large[1].body) > analysis.SITEMAP_IN_PROCESS_MAX_BYTES
        with pytest.raises(RuntimeError, match="crawl process"):
            await pool.analyse_sitemap(*large)
    finally:
        pool.close()


def test_parser_pipes_hold_a_whole_batch() -> None:
    """A batch (~300 KiB) fits the pipe: the parser no longer waits for the loop to
    write it a 64 KiB piece at a time (bench/RESULTS.md, issue 14, session 28)."""
    processes = ParserProcesses(1)

    async def capacities() -> list[int]:
        processes.start()
        pipe = processes._pipes[0]
        return [fcntl.fcntl(fd, F_GETPIPE_SZ) for fd in (pipe._writer.fileno(),
                                                         pipe._reader.fileno())]  # fmt: skip

    try:
        assert asyncio.run(capacities()) == [PIPE_BYTES, PIPE_BYTES]
    finally:
        processes.close()


def test_answers_bigger_than_a_read_arrive_whole_even_from_a_process_that_then_died() -> None:
    """The loop reads the pipe 64 KiB at a time (parserpipe.py): an answer of many
    reads arrives whole, and one the process wrote before it died is delivered (the
    loop blocked meanwhile, so the answer and the end of file come in one wake-up;
    the answer framed fills its last read, so the loop reads on and finds the end)."""
    processes = ParserProcesses(1)
    size = next(n for n in range(300_000, 400_000) if _framed(bytes(n)) % _READ_BYTES == 0)

    async def answers() -> tuple[int, BaseException | None]:
        await processes.submit(int, "1")  # the process is up
        big = processes.submit(bytes, size)
        dying = processes.submit(os._exit, 3)
        time.sleep(1.0)  # the loop blocked: the process answers, then exits
        done, died = await asyncio.gather(big, dying, return_exceptions=True)
        assert isinstance(died, BaseException)
        return len(done), died

    try:
        got, died = asyncio.run(answers())
    finally:
        processes.close()
    assert got == size
    assert isinstance(died, ParserBroken)


def _framed(answer: bytes) -> int:
    """Bytes on the pipe for a function's answer (parserpipe.serve)."""
    return 4 + len(dumps_answer((True, answer)))


def test_plain_answers_go_marshalled_the_rest_pickled_all_as_they_were() -> None:
    """An answer of plain values goes marshalled (parserpipe.py); one holding anything
    marshal cannot write, or would write as another type, goes pickled: each comes
    back equal and of the same types."""
    plain = (True, [(("http://a/", 1, None, 2.5, False, b"\x00"), {"nofollow": 2}, [])])
    others = [
        (True, Counter(robots=1)),
        (False, ValueError("bad page")),
        (True, [Link("http://a/", False, None, None)]),
    ]
    assert dumps_answer(plain)[:1] == b"M"
    assert loads_answer(dumps_answer(plain)) == plain
    for answer in others:
        data = dumps_answer(answer)
        assert data[:1] == b"P"
        back = loads_answer(data)
        assert type(back[1]) is type(answer[1])
        assert repr(back) == repr(answer)


@pytest.mark.parametrize("hidden", [True, False])
def test_a_parser_process_does_not_run_the_parents_main_module_again(
    hidden: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A spawned child runs the parent's ``__main__`` again unless it is hidden while
    the child starts (parsers.py): for ``trawler crawl`` that was the whole CLI in every
    parser process. Here ``__main__`` is a script that leaves a file when it runs; the
    twin without the hiding shows the check can fail."""
    marker = tmp_path / "main-ran"
    script = tmp_path / "main_script.py"
    script.write_text(f"open({str(marker)!r}, 'w').close()\n")
    main = types.ModuleType("__main__")
    main.__file__ = str(script)
    monkeypatch.setitem(sys.modules, "__main__", main)
    if not hidden:
        monkeypatch.setattr(parsers, "_main_module_hidden", contextlib.nullcontext)
    processes = ParserProcesses(1)

    async def started() -> int:
        return await processes.submit(int, "7")

    try:
        assert asyncio.run(started()) == 7
    finally:
        processes.close()
    assert marker.exists() is not hidden
