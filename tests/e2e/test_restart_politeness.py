"""Politeness across a restart: kill -9 (or SIGTERM) right after a request, restart
at once, and read the server's log: no host is contacted again before its interval
has passed, and robots.txt is fetched once per host however often the crawl restarts.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from tests.e2e.conftest import Served, start_testsite
from tests.e2e.test_crash import start_crawl
from tests.e2e.test_crawl import CLOCK_SLACK_S, min_interval_by_host

pytestmark = pytest.mark.timeout(180)

DELAY_S = 2.0


def wait_for_page_requests(served: Served, seen: int, more: int = 1) -> int:
    """Poll the server's log until ``more`` page requests beyond ``seen`` arrived."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        pages = sum(1 for entry in served.log() if entry["path"] != "/robots.txt")
        if pages >= seen + more:
            return pages
        time.sleep(0.005)
    raise AssertionError("the crawl sent no page request for 60 s")


def resume_crawl(data: Path) -> subprocess.Popen[str]:
    """The job in DATA carried on: its stored options, no seeds."""
    cmd = [sys.executable, "-m", "trawler", "crawl", "--data", str(data), "-q"]
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def test_restart_after_kill_keeps_each_host_interval_and_robots(tmp_path: Path) -> None:
    served = start_testsite(tmp_path, hosts=3, pages=8)
    data = tmp_path / "data"
    seen = 0
    try:
        for run, stop in enumerate(
            (signal.SIGKILL, signal.SIGKILL, signal.SIGTERM, signal.SIGKILL)
        ):
            crawler = (
                resume_crawl(data) if run else start_crawl(served, data, "--delay", str(DELAY_S))
            )
            # Stop the crawler right after a request: its send time is not committed yet.
            seen = wait_for_page_requests(served, seen)
            crawler.send_signal(stop)
            crawler.wait(30)
        final = resume_crawl(data)
        wait_for_page_requests(served, seen, more=3)
        final.send_signal(signal.SIGTERM)
        final.wait(30)
    finally:
        served.process.terminate()
    log = served.log()
    gaps = min_interval_by_host(log)  # robots.txt requests included
    assert len(gaps) == 3 and min(gaps.values()) >= DELAY_S - CLOCK_SLACK_S, gaps
    robots = Counter(entry["host"] for entry in log if entry["path"] == "/robots.txt")
    assert robots == {served.site.netloc(i): 1 for i in range(3)}, robots
