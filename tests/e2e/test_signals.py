"""Stops by signal: exit 130 after SIGINT, 143 after SIGTERM, 0 only at the end; no
traceback from any process (parser processes included) when Ctrl-C hits the group."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.e2e.cli_checks import wait_until
from tests.e2e.conftest import export_rows, start_testsite
from tests.e2e.scripted import Scripted, page, start_scripted
from tests.e2e.test_crash import start_crawl

TRAWLER = [sys.executable, "-m", "trawler"]


def _pages_requested(served) -> int:
    return sum(1 for entry in served.log() if entry["path"] != "/robots.txt")


def test_ctrl_c_stops_the_crawl_quietly_with_130(tmp_path: Path) -> None:
    served = start_testsite(tmp_path, hosts=3, pages=40)
    data = tmp_path / "data"
    try:
        # Its own session: the test sends SIGINT to the whole group, as a terminal's
        # Ctrl-C does, so the parser processes get it too.
        crawler = start_crawl(served, data, "--delay", "0.2", "--parse-processes", "2",
                              start_new_session=True)  # fmt: skip
        wait_until(lambda: _pages_requested(served) >= 6, 30, "pages parsed")
        time.sleep(0.3)  # parser processes busy, not only starting
        os.killpg(crawler.pid, signal.SIGINT)
        _out, err = crawler.communicate(timeout=30)
    finally:
        served.process.terminate()
    assert crawler.returncode == 130, err
    assert "Traceback" not in err and "KeyboardInterrupt" not in err, err
    assert len(export_rows(data)) > 0


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_idle_worker_stopped_by_signal_exits_128_plus_signal(
    tmp_path: Path, redis_url: str, fresh_postgres_url: str, sig: int
) -> None:
    worker = subprocess.Popen(
        [*TRAWLER, "worker", "--redis", redis_url, "--postgres", fresh_postgres_url,
         "--warc-dir", str(tmp_path / "warc")],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    # The WARC directory is made once the worker runs, its signal handlers set.
    wait_until(lambda: (tmp_path / "warc").is_dir(), 30, "the worker to start")
    time.sleep(0.5)
    worker.send_signal(sig)
    _out, err = worker.communicate(timeout=30)
    assert worker.returncode == 128 + sig, err
    assert "Traceback" not in err, err


def test_worker_exits_0_when_idle_by_option(tmp_path: Path, redis_url: str,
                                            fresh_postgres_url: str) -> None:  # fmt: skip
    done = subprocess.run(
        [*TRAWLER, "worker", "--redis", redis_url, "--postgres", fresh_postgres_url,
         "--warc-dir", str(tmp_path / "warc"), "--exit-when-idle", "-q"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert os.path.isdir(tmp_path / "warc")


SLOW_SITE = {"0": {"/robots.txt": page("User-agent: *\nAllow: /\n"),
                   "/": page('<a href="/slow">slow</a>'),
                   "/slow": {**page("late"), "delay_s": 20}}}  # fmt: skip


def _second_signal_cuts_the_stop_short(process: subprocess.Popen[str], site: Scripted) -> float:
    """SIGTERM while /slow is in flight (the stop waits for it, up to 5 s), SIGTERM
    again: returns how long the process took to exit after the second one."""
    wait_until(lambda: "/" in site.paths(), 30, "the home page")
    time.sleep(1.5)  # /slow asked at once (--delay 0), answered in 20 s
    process.send_signal(signal.SIGTERM)
    time.sleep(0.3)
    process.send_signal(signal.SIGTERM)
    second = time.monotonic()
    process.communicate(timeout=30)
    return time.monotonic() - second


def _kill(site: Scripted) -> None:
    """The server would wait out /slow's 20 s before it exits."""
    site.process.kill()
    site.process.wait(10)


def test_a_second_signal_cuts_a_crawls_stop_short(tmp_path: Path) -> None:
    site = start_scripted(tmp_path, SLOW_SITE)
    try:
        crawler = subprocess.Popen(
            [*TRAWLER, "crawl", site.bases[0] + "/", "--data", str(tmp_path / "data"),
             "--allow-private", "--no-sitemaps", "--delay", "0", "-q"],
            stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        took_s = _second_signal_cuts_the_stop_short(crawler, site)
    finally:
        _kill(site)
    assert crawler.returncode == 143
    assert took_s < 3.0  # not the 5 s grace of requests in flight


def test_a_second_signal_cuts_a_workers_stop_short(
    tmp_path: Path, redis_url: str, fresh_postgres_url: str
) -> None:
    site = start_scripted(tmp_path, SLOW_SITE)
    try:
        submitted = subprocess.run(
            [*TRAWLER, "submit", site.bases[0] + "/", "--redis", redis_url,
             "--postgres", fresh_postgres_url, "--allow-private", "--no-sitemaps",
             "--delay", "0"],
            capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        assert submitted.returncode == 0, submitted.stderr
        worker = subprocess.Popen(
            [*TRAWLER, "worker", "--redis", redis_url, "--postgres", fresh_postgres_url,
             "--warc-dir", str(tmp_path / "warc"), "-q"],
            stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        took_s = _second_signal_cuts_the_stop_short(worker, site)
    finally:
        _kill(site)
    assert worker.returncode == 143
    assert took_s < 3.0
