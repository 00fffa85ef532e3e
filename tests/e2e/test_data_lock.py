"""Two processes, one data directory: a second writer is refused, readers keep working."""

from __future__ import annotations

import json
from pathlib import Path

from tests.e2e.cli_checks import assert_one_line_error, wait_until
from tests.e2e.conftest import run_trawler, start_testsite
from tests.e2e.test_crash import assert_complete_and_once, assert_warc_valid, start_crawl
from tests.e2e.test_crawl import CLOCK_SLACK_S, min_interval_by_host

DELAY_S = 0.5


def test_second_crawl_is_refused_and_readers_work_during_a_crawl(tmp_path: Path) -> None:
    served = start_testsite(tmp_path, hosts=3, pages=40)  # ~20 s at 0.5 s a page per host
    data = tmp_path / "data"
    try:
        first = start_crawl(served, data, "--delay", str(DELAY_S))
        wait_until(lambda: len(served.log()) >= 6, 30, "the first crawl to fetch pages")
        second = run_trawler("crawl", *served.seeds, "--data", str(data), "--allow-private",
                             "--scope", "any", "--delay", "0.01", "-q")  # fmt: skip
        line = assert_one_line_error(second, 1)
        assert f"pid {first.pid}" in line and str(data) in line, line
        rows = run_trawler("export", "--data", str(data))
        assert rows.returncode == 0 and rows.stdout, rows.stderr
        stats = run_trawler("stats", "--data", str(data), "--json")
        assert stats.returncode == 0 and json.loads(stats.stdout)["job"]["state"] == "running"
        hits = run_trawler("search", "--data", str(data), "page", "--json")
        assert hits.returncode == 0, hits.stderr
        assert first.poll() is None, "the first crawl ended before the readers ran"
        assert first.wait(120) == 0, first.stderr.read() if first.stderr else ""
    finally:
        served.process.terminate()
    gaps = min_interval_by_host(served.log())
    assert min(gaps.values()) >= DELAY_S - CLOCK_SLACK_S, gaps
    assert_warc_valid(data, assert_complete_and_once(served, data))


def test_lock_of_a_killed_crawl_does_not_outlive_it(tmp_path: Path) -> None:
    served = start_testsite(tmp_path, hosts=2, pages=30)
    data = tmp_path / "data"
    try:
        first = start_crawl(served, data, "--delay", "0.3")
        wait_until(lambda: len(served.log()) >= 3, 30, "the crawl to fetch pages")
        first.kill()  # kill -9: no clean-up runs, the kernel drops the lock
        first.wait(10)
        resumed = run_trawler("crawl", "--data", str(data), "-q", "--delay", "0.02")
        assert resumed.returncode == 0, resumed.stderr
    finally:
        served.process.terminate()
    assert_warc_valid(data, assert_complete_and_once(served, data))
