"""Pause, resume and cancel from another process, honoured by a running `trawler crawl`
and by a running `trawler worker` within 2 s, judged from the web server's access log
(its own clock): no request starts later than 2 s after the command returned.

Each test would fail without the control it checks: the site takes about 10 s to
crawl at the delay used and the job is stopped about 1 s in, so a crawl that went
on would log requests in the window the test watches.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

from tests.e2e.cli_checks import wait_until
from tests.e2e.conftest import Served, export_rows, run_trawler, start_testsite
from tests.e2e.test_crash import assert_complete_and_once, fetch_times, start_crawl
from tests.e2e.test_distributed import assert_complete_once, exported, submit

HONOURED_S = 2.0  # the bound
WATCH_S = 4.0  # how long a paused or cancelled job is watched for requests


def job_command(*args: str) -> float:
    """Run `trawler jobs …`; the time it returned, when the state is in the store."""
    out = run_trawler("jobs", *args)
    assert out.returncode == 0, out.stderr
    return time.time()


def requests_after(served: Served, moment: float) -> list[dict]:
    return [entry for entry in served.log() if entry["t"] > moment]


def show(*args: str) -> dict:
    out = run_trawler("jobs", "show", *args, "--json")
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def only_job(data: Path) -> str:
    out = run_trawler("jobs", "list", "--data", str(data), "--json")
    assert out.returncode == 0, out.stderr
    (job,) = json.loads(out.stdout)["jobs"]
    return job["id"]


def assert_quiet_after(served: Served, stopped_at: float, what: str) -> None:
    """Requests stop within HONOURED_S of ``stopped_at`` and none come for WATCH_S."""
    time.sleep(WATCH_S)
    late = requests_after(served, stopped_at + HONOURED_S)
    assert not late, f"{len(late)} request(s) more than {HONOURED_S} s after {what}: {late[:3]}"


def _site(tmp_path: Path) -> Served:
    return start_testsite(tmp_path, hosts=2, pages=40)


def test_a_running_crawl_pauses_and_resumes(tmp_path: Path) -> None:
    served, data = _site(tmp_path), tmp_path / "data"
    try:
        crawl = start_crawl(served, data, "--delay", "0.25")
        wait_until(lambda: len(served.log()) >= 6, 60, "the crawl to fetch pages")
        job = only_job(data)
        paused_at = job_command("pause", job, "--data", str(data))
        assert_quiet_after(served, paused_at, "the pause")
        assert crawl.poll() is None, "a paused crawl waits, it does not exit"
        assert show(job, "--data", str(data))["state"] == "paused"
        resumed_at = job_command("resume", job, "--data", str(data))
        assert crawl.wait(120) == 0, crawl.stderr.read() if crawl.stderr else ""
    finally:
        served.process.terminate()
    assert requests_after(served, resumed_at), "the resumed crawl carried on"
    assert_complete_and_once(served, data)
    assert max(len(t) for t in fetch_times(served).values()) == 1, "fetched twice"
    events = show(job, "--data", str(data))["events"]
    assert [(e["to_state"], e["reason"]) for e in events] == [
        ("pending", "created"), ("running", "started"), ("paused", "user"),
        ("running", "user"), ("finished", "complete")]  # fmt: skip


def test_a_running_crawl_is_cancelled_keeping_what_it_stored(tmp_path: Path) -> None:
    served, data = _site(tmp_path), tmp_path / "data"
    try:
        crawl = start_crawl(served, data, "--delay", "0.25")
        wait_until(lambda: len(served.log()) >= 6, 60, "the crawl to fetch pages")
        job = only_job(data)
        cancelled_at = job_command("cancel", job, "--data", str(data))
        assert crawl.wait(30) == 0
        assert_quiet_after(served, cancelled_at, "the cancel")
    finally:
        served.process.terminate()
    fetched = set(fetch_times(served))
    stored = [row["url"] for row in export_rows(data)]
    assert sorted(stored) == sorted(fetched)  # every page fetched was kept, once
    assert 0 < len(stored) < len(served.site.reachable(served.seeds, None, "any"))
    assert show(job, "--data", str(data))["state"] == "cancelled"
    again = run_trawler("crawl", "--data", str(data))
    assert again.returncode == 0 and "already cancelled" in again.stdout


def _worker(tmp: Path, redis: str, postgres: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "trawler", "worker", "--redis", redis, "--postgres", postgres,
         "--warc-dir", str(tmp / "warc"), "--lease-timeout", "10", "-q"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip


def _stop(worker: subprocess.Popen[str]) -> None:
    if worker.poll() is None:
        worker.send_signal(signal.SIGTERM)
    worker.wait(30)


def test_a_worker_pauses_resumes_and_finishes_the_job(
    tmp_path: Path, redis_url: str, fresh_postgres_url: str
) -> None:
    served = _site(tmp_path)
    pg = ("--postgres", fresh_postgres_url)
    worker = None
    try:
        job = submit(served, redis_url, fresh_postgres_url, "--delay", "0.25")
        worker = _worker(tmp_path, redis_url, fresh_postgres_url)
        wait_until(lambda: len(served.log()) >= 6, 60, "the worker to fetch pages")
        paused_at = job_command("pause", job, *pg)
        assert_quiet_after(served, paused_at, "the pause")
        assert worker.poll() is None, "a worker outlives a paused job"
        resumed_at = job_command("resume", job, *pg)
        wait_until(lambda: show(job, *pg)["state"] == "finished", 120, "the job to finish")
    finally:
        if worker is not None:
            _stop(worker)
        served.process.terminate()
    assert requests_after(served, resumed_at), "the resumed job carried on"
    assert_complete_once(served, fresh_postgres_url, job)
    assert max(len(t) for t in fetch_times(served).values()) == 1, "fetched twice"


def test_a_worker_leaves_a_cancelled_job_keeping_what_it_stored(
    tmp_path: Path, redis_url: str, fresh_postgres_url: str
) -> None:
    served = _site(tmp_path)
    worker = None
    try:
        job = submit(served, redis_url, fresh_postgres_url, "--delay", "0.25")
        worker = _worker(tmp_path, redis_url, fresh_postgres_url)
        wait_until(lambda: len(served.log()) >= 6, 60, "the worker to fetch pages")
        cancelled_at = job_command("cancel", job, "--postgres", fresh_postgres_url)
        assert_quiet_after(served, cancelled_at, "the cancel")
        assert worker.poll() is None, "the worker waits for other jobs"
    finally:
        if worker is not None:
            _stop(worker)
        served.process.terminate()
    stored = sorted(row["url"] for row in exported(fresh_postgres_url, job))
    assert stored == sorted(fetch_times(served))
    assert 0 < len(stored) < len(served.site.reachable(served.seeds, None, "any"))
