"""Distributed mode end to end: several worker processes, one Redis, one PostgreSQL."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

from tests.e2e.conftest import Served, start_testsite
from tests.e2e.test_crawl import CLOCK_SLACK_S, min_interval_by_host, page_requests, url_of
from tests.servers import start_redis

TRAWLER = [sys.executable, "-m", "trawler"]


def submit(
    served: Served, redis: str, postgres: str, *args: str, allow_private: bool = True
) -> str:
    private = ["--allow-private"] if allow_private else []
    out = subprocess.run(
        [*TRAWLER, "submit", *served.seeds, "--redis", redis, "--postgres", postgres,
         *private, "--scope", "any", "--no-sitemaps", *args],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    return out.stdout.strip().splitlines()[-1]


def start_worker(tmp: Path, redis: str, postgres: str, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [*TRAWLER, "worker", "--redis", redis, "--postgres", postgres, "--warc-dir",
         str(tmp / "warc"), "--exit-when-idle", "-q", *args],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip


def exported(postgres: str, job: str) -> list[dict]:
    command = [*TRAWLER, "export", "--postgres", postgres, "--job", job, "--include-noindex"]
    out = subprocess.run(command, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    return [json.loads(line) for line in out.stdout.splitlines()]


def assert_complete_once(served: Served, postgres: str, job: str) -> None:
    urls = [row["url"] for row in exported(postgres, job)]
    assert len(urls) == len(set(urls)), "a page was stored twice"
    assert set(urls) == set(served.site.reachable(served.seeds, None, "any"))


def live_workers(redis: str, job: str, want: int, timeout_s: float) -> list[dict]:
    """`trawler workers --json` for this job, polled until ``want`` workers show up."""
    deadline = time.monotonic() + timeout_s
    while True:
        out = subprocess.run([*TRAWLER, "workers", "--redis", redis, "--json"],
                             capture_output=True, text=True, timeout=30)  # fmt: skip
        assert out.returncode == 0, out.stderr
        listed = [w for w in map(json.loads, out.stdout.splitlines()) if w["job_id"] == job]
        if len(listed) >= want or time.monotonic() > deadline:
            return listed
        time.sleep(0.3)


def wait_all(workers: list[subprocess.Popen[str]], timeout: float = 120) -> None:
    for worker in workers:
        code = worker.wait(timeout)
        assert code in (0, -signal.SIGKILL), worker.stderr.read() if worker.stderr else ""


def test_three_workers_share_one_crawl_politely(
    tmp_path: Path, redis_url: str, fresh_postgres_url: str
) -> None:
    served = start_testsite(tmp_path, hosts=4, pages=30)  # ~11 s: all three workers join
    try:
        job = submit(served, redis_url, fresh_postgres_url, "--delay", "0.3")
        workers = [start_worker(tmp_path, redis_url, fresh_postgres_url) for _ in range(3)]
        listed = live_workers(redis_url, job, want=3, timeout_s=15)
        wait_all(workers)
    finally:
        served.process.terminate()
    assert_complete_once(served, fresh_postgres_url, job)
    fetched = [url_of(e) for e in page_requests(served)]
    assert len(fetched) == len(set(fetched))
    gaps = min_interval_by_host(served.log())
    assert min(gaps.values()) >= 0.3 - CLOCK_SLACK_S, gaps  # across all three workers
    robots = [e for e in served.log() if e["path"] == "/robots.txt"]
    assert len(robots) == 4  # once per host: the workers share robots.txt through Redis
    assert len(listed) >= 3, listed
    assert all(w["age_s"] < 5 for w in listed)
    assert len(list((tmp_path / "warc").glob("*.warc.gz"))) >= 2  # a WARC file per worker


def test_worker_killed_with_9_loses_nothing(
    tmp_path: Path, redis_url: str, fresh_postgres_url: str
) -> None:
    served = start_testsite(tmp_path, hosts=4, pages=25)
    try:
        job = submit(served, redis_url, fresh_postgres_url, "--delay", "0.1")
        workers = [start_worker(tmp_path, redis_url, fresh_postgres_url, "--lease-timeout", "2")
                   for _ in range(3)]  # fmt: skip
        time.sleep(2.5)
        workers[0].send_signal(signal.SIGKILL)
        wait_all(workers)
    finally:
        served.process.terminate()
    assert_complete_once(served, fresh_postgres_url, job)


def test_redis_restart_mid_crawl(tmp_path: Path, fresh_postgres_url: str) -> None:
    redis = start_redis(tmp_path / "redis")
    served = start_testsite(tmp_path, hosts=3, pages=25)
    try:
        job = submit(served, redis.url, fresh_postgres_url, "--delay", "0.1")
        workers = [start_worker(tmp_path, redis.url, fresh_postgres_url) for _ in range(2)]
        time.sleep(2.5)
        redis.restart()  # graceful: the AOF is written, then read back
        wait_all(workers)
    finally:
        served.process.terminate()
        redis.stop()
    assert_complete_once(served, fresh_postgres_url, job)


def test_robots_txt_of_one_job_does_not_leak_into_another(
    tmp_path: Path, redis_url: str, fresh_postgres_url: str
) -> None:
    """A job that may not fetch private addresses learns `private_address` for the
    loopback site's robots.txt; a later job that may must not inherit that answer."""
    served = start_testsite(tmp_path, hosts=2, pages=8)
    try:
        guarded = submit(served, redis_url, fresh_postgres_url, "--delay", "0.05",
                         allow_private=False)  # fmt: skip
        wait_all([start_worker(tmp_path, redis_url, fresh_postgres_url)])
        errors = {row["error"] for row in exported(fresh_postgres_url, guarded)}
        assert errors == {"private_address"}  # the premise: job A was refused the site
        job = submit(served, redis_url, fresh_postgres_url, "--delay", "0.05")
        wait_all([start_worker(tmp_path, redis_url, fresh_postgres_url)])
    finally:
        served.process.terminate()
    assert_complete_once(served, fresh_postgres_url, job)
    assert all(row["error"] != "private_address" for row in exported(fresh_postgres_url, job))


def test_worker_killed_right_after_a_request_keeps_the_host_interval(
    tmp_path: Path, redis_url: str, fresh_postgres_url: str
) -> None:
    """A worker's request leaves no trace in Redis until it finishes with the host; when
    it dies right after one, its replacement must still wait the interval from it."""
    from tests.e2e.test_restart_politeness import wait_for_page_requests

    delay_s = 3.0
    served = start_testsite(tmp_path, hosts=2, pages=8)
    seen = 0
    try:
        submit(served, redis_url, fresh_postgres_url, "--delay", str(delay_s))
        for _ in range(2):  # the lease times out well within the interval
            worker = start_worker(tmp_path, redis_url, fresh_postgres_url, "--lease-timeout", "2")
            seen = wait_for_page_requests(served, seen, more=2)
            worker.send_signal(signal.SIGKILL)
            worker.wait(30)
    finally:
        served.process.terminate()
    log = served.log()
    gaps = min_interval_by_host(log)
    assert len(gaps) == 2 and min(gaps.values()) >= delay_s - CLOCK_SLACK_S, gaps
    robots = [e for e in log if e["path"] == "/robots.txt"]
    assert len(robots) == 2  # once per host: the replacement reads it from Redis
