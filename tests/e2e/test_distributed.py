"""Distributed mode end to end: several worker processes, one Redis, one PostgreSQL."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.e2e.conftest import Served, start_testsite
from tests.e2e.test_crawl import CLOCK_SLACK_S, min_interval_by_host, page_requests, url_of
from tests.servers import free_port, start_postgres, start_redis
from trawler.frontier.workers import GONE_AFTER_S

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


def forget_shared_robots(redis_url: str, served: Served) -> None:
    """robots.txt answers are shared by every job through Redis, by origin
    (frontier/redis_robots.py): the answer of an earlier test's site on the same
    port (the OS reuses them) would be read instead of this site's being fetched."""
    import redis

    client = redis.Redis.from_url(redis_url)
    try:
        for seed in served.seeds:
            origin = seed.split("/")[2]
            keys = list(client.scan_iter(match=f"trawler:robots:*{origin}*", count=1000))
            if keys:
                client.delete(*keys)
    finally:
        client.close()


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
    """Each worker's exit. Their stderr is read meanwhile (``communicate``): a worker
    logging more than a pipe holds (64 KiB of warnings on a loaded machine) would
    otherwise block on its write, never exit, and look like a hang."""
    for worker in workers:
        _, err = worker.communicate(timeout=timeout)
        assert worker.returncode in (0, -signal.SIGKILL), err


def test_three_workers_share_one_crawl_politely(
    tmp_path: Path, redis_url: str, fresh_postgres_url: str
) -> None:
    served = start_testsite(tmp_path, hosts=4, pages=30)  # ~11 s: all three workers join
    forget_shared_robots(redis_url, served)
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
    forget_shared_robots(redis_url, served)
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


# -- outages ------------------------------------------------------------------------------
@dataclass
class LoggedWorker:
    process: subprocess.Popen[str]
    log_path: Path

    def lines(self, start: str = "", level: str = "") -> list[str]:
        """Messages that start with ``start`` (of log lines at ``level``, if given)."""
        parts = (line.split(" ", 3) for line in self.log_path.read_text().splitlines())
        return [p[3] for p in parts if len(p) == 4 and p[3].startswith(start) and level in p[2]]


def start_logged_worker(
    tmp: Path, name: str, redis: str, postgres: str, *args: str
) -> LoggedWorker:
    log_path = tmp / f"{name}.log"
    with log_path.open("w") as log:
        process = subprocess.Popen(
            [*TRAWLER, "worker", "--redis", redis, "--postgres", postgres, "--warc-dir",
             str(tmp / "warc"), "--worker-id", name, "-q", *args],
            stdout=subprocess.DEVNULL, stderr=log, text=True,
        )  # fmt: skip
    return LoggedWorker(process, log_path)


def wait_for_requests(served: Served, count: int, timeout_s: float) -> int:
    """Page requests the site has served, once at least ``count`` (polled, bounded)."""
    deadline = time.monotonic() + timeout_s
    while (served_now := len(page_requests(served))) < count:
        assert time.monotonic() < deadline, f"{served_now} requests, waited for {count}"
        time.sleep(0.2)
    return served_now


@pytest.mark.timeout(300)
def test_workers_ride_out_a_redis_and_a_postgres_outage(tmp_path: Path) -> None:
    """Redis killed for 20 s, then PostgreSQL stopped for 20 s, in one 3-worker crawl."""
    redis = start_redis(tmp_path / "redis")
    postgres = start_postgres()
    served = start_testsite(tmp_path, hosts=3, pages=40)  # ~20 s of crawling at this delay
    workers: list[LoggedWorker] = []
    try:
        job = submit(served, redis.url, postgres.url, "--delay", "0.5")
        workers = [start_logged_worker(tmp_path, f"w{i}", redis.url, postgres.url,
                                       "--exit-when-idle", "--lease-timeout", "10")
                   for i in range(3)]  # fmt: skip
        before = wait_for_requests(served, 12, timeout_s=30)
        redis.kill()  # the last second of writes may be lost: leases and scripts heal that
        time.sleep(20)
        assert all(w.process.poll() is None for w in workers), "a worker exited"
        redis.start()
        between = wait_for_requests(served, before + 12, timeout_s=30)
        postgres.halt()  # fast shutdown: open connections get AdminShutdown
        time.sleep(20)
        assert all(w.process.poll() is None for w in workers), "a worker exited"
        postgres.start()
        for worker in workers:
            assert worker.process.wait(120) == 0, worker.log_path.read_text()[-3000:]
        assert len(page_requests(served)) > between + 12  # the crawl went on after both
        assert_complete_once(served, postgres.url, job)
    finally:
        for worker in workers:
            worker.process.kill()
        served.process.terminate()
        redis.stop()
        postgres.stop()
    for worker in workers:  # one line when lost, one when back: not one per call
        assert len(worker.lines("lost Redis at")) == 1, worker.log_path.read_text()
        assert len(worker.lines("Redis back after")) == 1
        assert len(worker.lines("lost PostgreSQL at")) <= 1
        assert len(worker.lines("PostgreSQL back after")) == len(worker.lines("lost PostgreSQL"))
        outage_lines = ("lost Redis at", "Redis back", "lost PostgreSQL at", "PostgreSQL back")
        assert all(m.startswith(outage_lines) for m in worker.lines(level="WARNING")), "log spam"
        assert not worker.lines(level="ERROR")
    assert any(worker.lines("PostgreSQL back after") for worker in workers)


def test_sigterm_during_an_outage_stops_the_worker_at_once(
    tmp_path: Path, fresh_postgres_url: str
) -> None:
    """A worker told to stop while Redis is down gives up what it has not committed
    and exits at once; its leased URLs go to the next worker, no page is lost."""
    redis = start_redis(tmp_path / "redis")
    served = start_testsite(tmp_path, hosts=2, pages=15)
    workers: list[LoggedWorker] = []
    try:
        job = submit(served, redis.url, fresh_postgres_url, "--delay", "0.2")
        args = ("--exit-when-idle", "--lease-timeout", "3")
        workers.append(start_logged_worker(tmp_path, "first", redis.url, fresh_postgres_url, *args))
        wait_for_requests(served, 5, timeout_s=30)
        redis.kill()
        time.sleep(3)  # long enough for every call to be waiting out the outage
        assert workers[0].process.poll() is None
        stopped = time.monotonic()
        workers[0].process.send_signal(signal.SIGTERM)
        workers[0].process.wait(10)
        assert time.monotonic() - stopped < 5, "not stopped at once"
        assert workers[0].lines("stopped during an outage")
        redis.start()
        workers.append(start_logged_worker(tmp_path, "next", redis.url, fresh_postgres_url, *args))
        assert workers[1].process.wait(120) == 0, workers[1].log_path.read_text()[-3000:]
        assert_complete_once(served, fresh_postgres_url, job)
    finally:
        for worker in workers:
            worker.process.kill()
        served.process.terminate()
        redis.stop()
    assert all("results not committed" in m for m in workers[0].lines(level="ERROR"))


# -- `trawler workers` ---------------------------------------------------------------------
def listed_workers(redis: str, *args: str) -> subprocess.CompletedProcess[str]:
    out = subprocess.run([*TRAWLER, "workers", "--redis", redis, *args],
                         capture_output=True, text=True, timeout=30)  # fmt: skip
    assert out.returncode == 0, out.stderr
    return out


def workers_until(redis: str, want: Callable[[dict[str, dict]], bool], timeout_s: float) -> dict:
    """`trawler workers --json` by worker id, polled until ``want`` holds (bounded)."""
    deadline = time.monotonic() + timeout_s
    while True:
        lines = listed_workers(redis, "--json").stdout.splitlines()
        found = {w["worker_id"]: w for w in map(json.loads, lines)}
        if want(found) or time.monotonic() > deadline:
            return found
        time.sleep(0.3)


def test_workers_lists_idle_exited_and_killed_workers(
    tmp_path: Path, redis_url: str, fresh_postgres_url: str
) -> None:
    """Idle workers beat too; a clean exit is gone at once; a kill -9 is gone once its
    beat is older than GONE_AFTER_S, since its last beat."""
    tag = uuid.uuid4().hex[:8]
    quitter, victim = f"quit-{tag}", f"kill-{tag}"
    workers = {name: start_logged_worker(tmp_path, name, redis_url, fresh_postgres_url)
               for name in (quitter, victim)}  # fmt: skip
    try:  # no job in this database: both wait for work
        found = workers_until(redis_url, lambda f: f.get(quitter, {}).get("state") == "idle"
                              and f.get(victim, {}).get("state") == "idle", 30)  # fmt: skip
        assert found[quitter]["state"] == found[victim]["state"] == "idle", found
        workers[quitter].process.send_signal(signal.SIGTERM)
        workers[quitter].process.wait(30)
        workers[victim].process.kill()
        killed_at = time.time()
        found = workers_until(redis_url, lambda f: f[quitter]["state"] == "gone", 10)
        assert found[quitter]["gone_since"] == pytest.approx(time.time(), abs=10)
        assert found[victim]["state"] == "idle"  # not yet: its last beat is recent
        found = workers_until(redis_url, lambda f: f[victim]["state"] == "gone", GONE_AFTER_S + 10)
        assert found[victim]["state"] == "gone"
        assert killed_at - 3 < found[victim]["gone_since"] < killed_at + 0.5  # its last beat
        assert found[victim]["age_s"] >= GONE_AFTER_S
        text = listed_workers(redis_url).stdout
        assert f"{victim}  gone since " in text and f"{quitter}  gone since " in text
    finally:
        for worker in workers.values():
            worker.process.kill()


def test_worker_without_redis_at_start_says_so_at_once(
    tmp_path: Path, fresh_postgres_url: str
) -> None:
    """Outages are ridden out once a worker runs; unreachable at start is a mistake."""
    port = free_port()
    nowhere = f"redis://127.0.0.1:{port}/0"
    started = time.monotonic()
    out = subprocess.run(
        [*TRAWLER, "worker", "--redis", nowhere, "--postgres", fresh_postgres_url,
         "--warc-dir", str(tmp_path / "warc"), "-q"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert out.returncode == 1, out.stderr
    assert time.monotonic() - started < 15
    assert "Traceback" not in out.stderr and "lost Redis" not in out.stderr
    assert len(out.stderr.strip().splitlines()) == 1 and f"127.0.0.1:{port}" in out.stderr
