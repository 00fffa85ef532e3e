"""The parser processes get the config once, at start, not with every batch."""

from __future__ import annotations

import asyncio
import time

import pytest

from trawler.analysis import AnalysisPool
from trawler.config import CrawlConfig
from trawler.dedup import url_fingerprint
from trawler.records import CrawlRequest, FetchResult

pytestmark = pytest.mark.timeout(120)
PAGES = 300
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
