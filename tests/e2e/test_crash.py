"""Crash safety: kill -9 at random moments, SIGTERM, an unwritable or full disk.

The guarantees (docs/architecture.md): at-least-once fetching, exactly-once
storing, no discovered URL lost, WARC files valid after any kill.
"""

from __future__ import annotations

import random
import resource
import signal
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path

from warcio.archiveiterator import ArchiveIterator

from tests.e2e.cli_checks import wait_until
from tests.e2e.conftest import Served, export_rows, job_data, run_trawler

KILLS = 12


def start_crawl(served: Served, data: Path, *args: str, **popen) -> subprocess.Popen[str]:
    cmd = [sys.executable, "-m", "trawler", "crawl", *served.seeds, "--data", str(data),
           "--allow-private", "--scope", "any", "-q", "--no-sitemaps", *args]  # fmt: skip
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **popen)


def fetch_times(served: Served) -> dict[str, list[float]]:
    times: dict[str, list[float]] = defaultdict(list)
    for entry in served.log():
        if entry["path"] != "/robots.txt":
            times[f"http://{entry['host']}{entry['path']}"].append(entry["t"])
    return times


def assert_complete_and_once(served: Served, data: Path) -> list[dict]:
    rows = export_rows(data)
    urls = [r["url"] for r in rows]
    assert len(urls) == len(set(urls)), "a page was stored twice"
    assert set(urls) == set(served.site.reachable(served.seeds, None, "any"))
    return rows


def assert_warc_valid(data: Path, rows: list[dict]) -> None:
    files = sorted((job_data(data) / "warc").glob("*.warc.gz"))
    assert not list((job_data(data) / "warc").glob("*.open"))
    targets = set()
    for path in files:
        with path.open("rb") as stream:
            for record in ArchiveIterator(stream, check_digests=True):
                if record.rec_type == "response":
                    targets.add(record.rec_headers.get_header("WARC-Target-URI"))
    assert {r["final_url"] for r in rows if r["status"]} <= targets


def test_kill_9_at_random_moments_loses_nothing(tmp_path: Path) -> None:
    from tests.e2e.conftest import start_testsite

    served = start_testsite(tmp_path, hosts=4, pages=40)
    data = tmp_path / "data"
    rng = random.Random(20261122)
    kills: list[float] = []
    try:
        for _ in range(KILLS):
            crawler = start_crawl(served, data, "--delay", "0.05")
            time.sleep(rng.uniform(0.5, 1.2))  # past start-up, into the crawl
            if crawler.poll() is not None:
                break  # finished before the kill: nothing left to interrupt
            crawler.send_signal(signal.SIGKILL)
            crawler.wait()
            kills.append(time.time())
        final = start_crawl(served, data, "--delay", "0.05")
        assert final.wait(120) == 0, final.stderr.read() if final.stderr else ""
    finally:
        served.process.terminate()
    assert len(kills) >= 10, "the crawl finished too soon to be killed 10 times"
    rows = assert_complete_and_once(served, data)
    assert_warc_valid(data, rows)
    # A page fetched again must have had a kill between the two fetches.
    for url, times in fetch_times(served).items():
        times.sort()
        for earlier, later in zip(times, times[1:], strict=False):
            assert any(earlier < k < later for k in kills), f"{url} fetched twice without a kill"


def test_sigterm_stops_cleanly_and_resume_completes(tmp_path: Path) -> None:
    from tests.e2e.conftest import start_testsite

    served = start_testsite(tmp_path, hosts=3, pages=30)
    data = tmp_path / "data"
    try:
        crawler = start_crawl(served, data, "--delay", "0.1")
        # Into the crawl (not its start-up, slow on a loaded machine): pages fetched.
        wait_until(lambda: len(served.log()) >= 8, 30, "the crawl to fetch pages")
        crawler.send_signal(signal.SIGTERM)
        stopped_at = time.monotonic()
        assert crawler.wait(15) == 128 + signal.SIGTERM
        assert time.monotonic() - stopped_at < 6
        partial = export_rows(data)
        assert 0 < len(partial) < len(served.site.reachable(served.seeds, None, "any"))
        resumed = run_trawler("crawl", "--data", str(data), "-q")  # stored options, no seeds
        assert resumed.returncode == 0, resumed.stderr
    finally:
        served.process.terminate()
    rows = assert_complete_and_once(served, data)
    assert_warc_valid(data, rows)
    times = fetch_times(served)
    assert max(len(t) for t in times.values()) == 1, "SIGTERM must hand back, not refetch"
    again = run_trawler("crawl", "--data", str(data))
    assert again.returncode == 0 and "already finished" in again.stdout


def _limit_file_size() -> None:
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # get EFBIG instead of being killed
    resource.setrlimit(resource.RLIMIT_FSIZE, (250_000, 250_000))


def test_full_disk_stops_with_clear_error_then_resumes(tmp_path: Path) -> None:
    """Simulate a full disk with RLIMIT_FSIZE: writes past 250 kB fail with EFBIG."""
    from tests.e2e.conftest import start_testsite

    served = start_testsite(tmp_path, hosts=3, pages=30)
    data = tmp_path / "data"
    try:
        crawler = start_crawl(served, data, "--delay", "0.02", preexec_fn=_limit_file_size)
        assert crawler.wait(60) == 1
        stderr = crawler.stderr.read() if crawler.stderr else ""
        assert "trawler: error: cannot write crawl data" in stderr
        assert "Traceback" not in stderr
        resumed = run_trawler("crawl", "--data", str(data), "-q")
        assert resumed.returncode == 0, resumed.stderr
    finally:
        served.process.terminate()
    rows = assert_complete_and_once(served, data)
    assert_warc_valid(data, rows)


def test_unwritable_data_directory_is_a_clear_error(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    out = run_trawler("crawl", "http://127.0.0.1:9/", "--data", str(blocker / "data"))
    assert out.returncode == 1
    assert out.stderr.startswith("trawler: error: cannot use data directory")
    assert len(out.stderr.strip().splitlines()) == 1
