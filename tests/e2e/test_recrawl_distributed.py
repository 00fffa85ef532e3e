"""Revisits on the distributed backend (issue 15): `trawler submit --recrawl` and two
`trawler worker`s on the session's redis-server and a PostgreSQL database of the
test's own, against the changing site. The server's access log is the witness for
304s, for politeness across both workers and for one visit per due time; PostgreSQL
for versions; the workers' WARC files, read by warcio, for the revisit records."""

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

import psycopg
import pytest
from warcio.archiveiterator import ArchiveIterator

from tests.e2e.conftest import run_trawler, until
from tests.e2e.test_recrawl import CLOCK_SLACK_S, Site, start_site
from tests.servers import PostgresServer
from trawler.store.warc_revisit import PROFILE_IDENTICAL, PROFILE_NOT_MODIFIED

pytestmark = pytest.mark.timeout(180)

REVISIT_MIN_S, REVISIT_MAX_S = 0.5, 3.0
WORKERS = 2
LEASE_S = 2.0  # the workers' --lease-timeout: how long a claim of due pages lasts
MORE_PAGES = 12  # /page-N beside the changing site's 8: a backlog at --delay 0.3
PAGES = {"/", "/plain"} | {f"/{kind}-{i}" for kind in ("fast", "never") for i in range(3)}


@dataclass
class Cluster:
    """One continuous job and its workers."""

    redis_url: str
    postgres_url: str
    job: str
    warc: Path
    workers: list[subprocess.Popen[str]]

    @property
    def connect(self) -> list[str]:
        return ["--redis", self.redis_url, "--postgres", self.postgres_url]

    def start_worker(self, name: str, lease_timeout_s: float = 60.0) -> subprocess.Popen[str]:
        cmd = [sys.executable, "-m", "trawler", "worker", *self.connect, "--warc-dir",
               str(self.warc), "--worker-id", name, "--lease-timeout", str(lease_timeout_s),
               "-q"]  # fmt: skip
        worker = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                  text=True)  # fmt: skip
        self.workers.append(worker)
        return worker

    def stop(self) -> str:
        """SIGTERM to every worker still running; their stderr."""
        err = ""
        for worker in self.workers:
            if worker.poll() is None:
                worker.send_signal(signal.SIGTERM)
            try:
                err += worker.communicate(timeout=30)[1] or ""
            except subprocess.TimeoutExpired:
                worker.kill()
                err += worker.communicate(timeout=10)[1] or ""
        return err

    def rows(self, sql: str) -> list[tuple]:
        with psycopg.connect(self.postgres_url) as conn:
            return conn.execute(sql, {"job": self.job}).fetchall()


WINDOW_OPTIONS = ("--revisit-min", str(REVISIT_MIN_S), "--revisit-max", str(REVISIT_MAX_S))


def _submit(tmp: Path, site: Site, redis_url: str, postgres: PostgresServer, delay_s: float,
            *window: str) -> Cluster:  # fmt: skip
    """``window``: --revisit-min and --revisit-max [WINDOW_OPTIONS]."""
    database = postgres.create_database(f"t_{uuid.uuid4().hex[:12]}")
    out = run_trawler(
        "submit", site.seed, "--redis", redis_url, "--postgres", database, "--allow-private",
        "--no-sitemaps", "--delay", str(delay_s), "--recrawl", *(window or WINDOW_OPTIONS),
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    job = out.stdout.strip().splitlines()[-1]
    return Cluster(redis_url, database, job, tmp / "warc", [])


def start_workers(
    request: pytest.FixtureRequest, site: Site, tmp: Path, delay_s: float, *window: str
) -> Callable[[], tuple[int, str]]:
    """A continuous job on the session's Redis and a database of its own, and two workers
    crawling it; returns what stops them: (their exit status if the same, else -1;
    their stderr). For test_recrawl_frontier.py's tests run on both backends."""
    redis_url = request.getfixturevalue("redis_url")
    cluster = _submit(tmp, site, redis_url, request.getfixturevalue("postgres_server"),
                      delay_s, *window)  # fmt: skip
    for i in range(WORKERS):
        cluster.start_worker(f"w{i}")

    def stop() -> tuple[int, str]:
        err = cluster.stop()
        codes = {worker.returncode for worker in cluster.workers}
        return (codes.pop() if len(codes) == 1 else -1), err

    return stop


def _pages(log: list[dict]) -> dict[str, list[float]]:
    """Arrival times of each page's requests (robots.txt left out)."""
    times: dict[str, list[float]] = {}
    for record in log:
        if record["path"] != "/robots.txt":
            times.setdefault(record["path"], []).append(record["t"])
    return times


def _run(
    tmp: Path, redis_url: str, postgres: PostgresServer, delay_s: float,
    enough: Callable[[list[dict]], bool],
) -> tuple[Cluster, Site, list[dict], str]:  # fmt: skip
    # More pages come due than the host's --delay lets through: they wait in its lane
    # longer than a claim lasts (the workers' lease), are claimed again by later polls,
    # and must not be queued twice.
    site = start_site(tmp, "--pages", str(MORE_PAGES))
    cluster = _submit(tmp, site, redis_url, postgres, delay_s)
    try:
        for i in range(WORKERS):
            cluster.start_worker(f"w{i}", lease_timeout_s=LEASE_S)
        until(lambda: enough(site.log()), 60)
        err = cluster.stop()
        log = site.log()
    finally:
        cluster.stop()
        site.process.terminate()
        site.process.wait(10)
    return cluster, site, log, err


def _revisited(log: list[dict]) -> bool:
    """Each page asked at least three times, and some answered 304."""
    pages = _pages(log)
    return len(pages) >= 8 + MORE_PAGES and all(len(times) >= 3 for times in pages.values())


@pytest.mark.parametrize("delay_s", [0.3, 0.0])
def test_two_workers_revisit_a_continuous_job(
    tmp_path: Path, redis_url: str, postgres_server: PostgresServer, delay_s: float
) -> None:
    """Unchanged pages answer 304, changed ones become new versions in PostgreSQL, the
    revisit records read back with warcio, no page is asked twice within --revisit-min
    (one visit per due time, though claims expire while pages wait in the lane), and
    consecutive requests are --delay apart across both workers; with --delay 0 the
    same gap check sees closer requests."""
    cluster, site, log, err = _run(tmp_path, redis_url, postgres_server, delay_s, _revisited)
    assert _revisited(log), (err, log)
    times = [r["t"] for r in log]
    gaps = [b - a for a, b in zip(times, times[1:], strict=False)]
    if delay_s == 0:
        assert min(gaps) < 0.3 - CLOCK_SLACK_S  # the gap check below can fail
        return
    assert min(gaps) >= delay_s - CLOCK_SLACK_S, log[gaps.index(min(gaps)) :][:2]
    for path, arrivals in _pages(log).items():  # one visit per due time
        apart = [b - a for a, b in zip(arrivals, arrivals[1:], strict=False)]
        assert min(apart) >= REVISIT_MIN_S - CLOCK_SLACK_S, (path, arrivals)
    assert any(r["status"] == 304 and r["path"].startswith("/never-") for r in log)
    _check_store(cluster, site, log)
    _check_warc(cluster.warc)
    _check_reads(cluster, site)


def _check_store(cluster: Cluster, site: Site, log: list[dict]) -> None:
    """Every request but the crawl's is one visit row; /fast-* pages have new versions,
    /never-* none."""
    visits = dict(cluster.rows("SELECT url, count(*) FROM visits WHERE job_id = %(job)s"
                               " GROUP BY url"))  # fmt: skip
    asked = {site.seed.rstrip("/") + path: len(t) for path, t in _pages(log).items()}
    # The crawl's request and one visit each for the others (a SIGTERM lets requests in
    # flight end and commits them): a page fetched twice for one due time is recorded
    # once (its due-time check), so it would show here wherever it came in the log.
    assert visits == {url: count - 1 for url, count in asked.items()}
    versions = dict(cluster.rows("SELECT url, max(version) FROM page_versions"
                                 " WHERE job_id = %(job)s GROUP BY url"))  # fmt: skip
    assert all(versions[f"{site.seed}fast-{i}"] >= 2 for i in range(3)), versions
    assert all(versions[f"{site.seed}never-{i}"] == 1 for i in range(3)), versions
    verdicts = dict(cluster.rows(
        "SELECT verdict, count(*) FROM visits WHERE job_id = %(job)s GROUP BY verdict"
    ))  # fmt: skip
    assert verdicts.get("not_modified", 0) > 0 and verdicts.get("changed", 0) > 0, verdicts
    assert verdicts.get("unchanged", 0) > 0, verdicts  # /plain: no validators, same body


def _check_warc(warc: Path) -> None:
    profiles: list[str] = []
    files = sorted(warc.glob("trawler-revisit-*.warc.gz"))
    assert {f.name.split("-")[2] for f in files} == {"w0", "w1"}, files  # both workers
    for path in files:
        with path.open("rb") as f:
            for record in ArchiveIterator(f, check_digests=True):
                if record.rec_type == "revisit":
                    profiles.append(record.rec_headers.get_header("WARC-Profile"))
    assert PROFILE_NOT_MODIFIED in profiles and PROFILE_IDENTICAL in profiles, profiles


def _check_reads(cluster: Cluster, site: Site) -> None:
    """`trawler versions` and `trawler export --versions` read PostgreSQL."""
    url = f"{site.seed}fast-0"
    out = run_trawler("versions", url, "--postgres", cluster.postgres_url, "--job", cluster.job)
    assert out.returncode == 0, out.stderr
    numbers = [json.loads(line)["version"] for line in out.stdout.splitlines()]
    assert numbers == list(range(1, len(numbers) + 1)) and len(numbers) >= 2
    source = ["--postgres", cluster.postgres_url, "--job", cluster.job]
    out = run_trawler("export", *source, "--versions", "all")
    assert out.returncode == 0, out.stderr
    rows = [json.loads(line) for line in out.stdout.splitlines()]
    assert [r["version"] for r in rows if r["url"] == url] == numbers
    out = run_trawler("export", *source)
    latest = [json.loads(line) for line in out.stdout.splitlines()]
    assert [r["version"] for r in latest if r["url"] == url] == [numbers[-1]]


def test_a_worker_killed_during_revisits_loses_nothing(
    tmp_path: Path, redis_url: str, postgres_server: PostgresServer
) -> None:
    """kill -9 of one of two workers while pages are revisited: its leases and claims
    expire, the other worker (the feeder after it, if it was) revisits every page again,
    none twice for one due time; versions stay numbered 1..n each differing from the
    one before, and every WARC file, the killed worker's repaired, reads back whole."""
    site = start_site(tmp_path)
    cluster = _submit(tmp_path, site, redis_url, postgres_server, 0.05)
    try:
        victim = cluster.start_worker("w0", lease_timeout_s=2.0)
        cluster.start_worker("w1", lease_timeout_s=2.0)
        assert until(lambda: sum(r["status"] == 304 for r in site.log()) >= 6, 60)
        victim.kill()
        victim.wait(10)
        killed_at = time.time()
        until(lambda: set(_pages([r for r in site.log() if r["t"] > killed_at + 4])) >= PAGES,
               40)  # fmt: skip
        err = cluster.stop()
        log = site.log()
    finally:
        cluster.stop()
        site.process.terminate()
        site.process.wait(10)
    assert set(_pages([r for r in log if r["t"] > killed_at + 4])) >= PAGES, (err, log)
    for path, arrivals in _pages(log).items():
        apart = [b - a for a, b in zip(arrivals, arrivals[1:], strict=False)]
        assert min(apart) >= REVISIT_MIN_S - CLOCK_SLACK_S, (path, arrivals)
    states = cluster.rows("SELECT count(*) FROM revisit_state WHERE job_id = %(job)s")
    assert states == [(len(PAGES),)]
    versions: dict[str, list[tuple[int, str]]] = {}
    for url, number, sha in cluster.rows(
        "SELECT url, version, content_sha256 FROM page_versions WHERE job_id = %(job)s"
        " ORDER BY url, version"
    ):  # fmt: skip
        versions.setdefault(url, []).append((number, sha))
    for url, rows in versions.items():
        assert [n for n, _ in rows] == list(range(1, len(rows) + 1)), url
        assert all(a[1] != b[1] for a, b in zip(rows, rows[1:], strict=False)), url
    for path in cluster.warc.glob("*.warc.gz"):
        with path.open("rb") as f:
            assert sum(1 for _ in ArchiveIterator(f, check_digests=True)) > 0, path
    assert not list(cluster.warc.glob("*.open")), list(cluster.warc.iterdir())
