"""One crawl, two backends: the e2e tests of crawl behaviour run on both.

``embedded``: `trawler crawl --data DIR`. ``distributed``: `trawler submit` into
the session's redis-server and a database of the test's own, then two
`trawler worker --exit-when-idle` processes until both have exited (bounded).
Either way the results are read the same way: `trawler export` rows, `trawler
stats --json`, the WARC directory, the job's state. A test takes the
``crawl_backend`` fixture (tests/e2e/conftest.py) and never asks which one it has,
except to mark a documented distributed limit.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

import pytest

from tests.e2e.conftest import job_data, run_trawler

BACKENDS = ("embedded", "distributed")
WORKERS = 2  # two workers: the URLs of one job are shared between processes
TRAWLER = [sys.executable, "-m", "trawler"]


@dataclass(slots=True)
class Crawled:
    """A finished crawl: its command output and how to read what it stored."""

    returncode: int
    stderr: str  # of `trawler crawl`, or of submit and every worker
    source: list[str]  # the options that name the crawl for export
    warc_dir: Path
    stats_source: list[str] = field(default_factory=list)  # and for stats, if more

    def export(self, *args: str, include_noindex: bool = True) -> list[dict]:
        """`trawler export --format jsonl` rows (noindex pages too unless told not)."""
        noindex = ["--include-noindex"] if include_noindex else []
        text = self.export_text("--format", "jsonl", *noindex, *args)
        return [json.loads(line) for line in text.splitlines()]

    def export_text(self, *args: str) -> str:
        """`trawler export`'s output as it is (CSV, say)."""
        out = run_trawler("export", *self.source, *args)
        assert out.returncode == 0, out.stderr
        return out.stdout

    def search(self, query: str, *args: str) -> list[dict]:
        """`trawler search --json`'s hits, best first."""
        out = run_trawler("search", *self.source, query, "--json", *args)
        assert out.returncode == 0, out.stderr
        return [json.loads(line) for line in out.stdout.splitlines()]

    def stats(self) -> dict:
        out = run_trawler("stats", *(self.stats_source or self.source), "--json")
        assert out.returncode == 0, out.stderr
        return json.loads(out.stdout)

    def state(self) -> str:
        return self.stats()["job"]["state"]


class CrawlBackend(Protocol):
    name: str

    def crawl(
        self, seeds: list[str], *options: str, allow_private: bool = True, timeout_s: float = 90
    ) -> Crawled:
        """Run a crawl of ``seeds`` to its end (with --allow-private unless told not)."""
        ...


@dataclass
class EmbeddedCrawls:
    """`trawler crawl`, each crawl in a data directory of its own under ``tmp``."""

    tmp: Path
    name: str = "embedded"
    crawls: int = 0

    def crawl(
        self, seeds: list[str], *options: str, allow_private: bool = True, timeout_s: float = 90
    ) -> Crawled:
        self.crawls += 1
        data = self.tmp / f"data-{self.crawls}"
        private = ["--allow-private"] if allow_private else []
        out = run_trawler("crawl", *seeds, "--data", str(data), *private, *options,
                          timeout=timeout_s)  # fmt: skip
        warc = job_data(data) / "warc" if out.returncode == 0 else data / "warc"
        return Crawled(out.returncode, out.stderr, ["--data", str(data)], warc)


@dataclass
class DistributedCrawls:
    """`trawler submit` + two workers on one Redis and one PostgreSQL database; each
    crawl is a new job there, its workers' WARC files in a directory of its own."""

    tmp: Path
    redis_url: str
    postgres_url: str
    name: str = "distributed"
    crawls: int = 0
    workers: list[subprocess.Popen[str]] = field(default_factory=list)
    worker_count: int = WORKERS  # workers a crawl starts

    def crawl(
        self, seeds: list[str], *options: str, allow_private: bool = True, timeout_s: float = 90
    ) -> Crawled:
        self.crawls += 1
        warc = self.tmp / f"warc-{self.crawls}"
        connect = ["--redis", self.redis_url, "--postgres", self.postgres_url]
        private = ["--allow-private"] if allow_private else []
        out = run_trawler("submit", *seeds, *connect, *private, *options, timeout=60)
        if out.returncode != 0:
            return Crawled(out.returncode, out.stderr, [], warc)
        job = out.stdout.strip().splitlines()[-1]
        logs = [self.tmp / f"worker-{self.crawls}-{i}.log" for i in range(self.worker_count)]
        started = [self._start_worker(warc, log) for log in logs]
        returncode = _wait_bounded(started, timeout_s)
        stderr = out.stderr + "".join(log.read_text(errors="replace") for log in logs)
        source = ["--postgres", self.postgres_url, "--job", job]
        return Crawled(returncode, stderr, source, warc, [*source, "--redis", self.redis_url])

    def _start_worker(self, warc: Path, log: Path) -> subprocess.Popen[str]:
        """A worker logging to a file: no pipe to fill, and its log kept for a failure."""
        connect = ["--redis", self.redis_url, "--postgres", self.postgres_url]
        with log.open("w") as stderr:
            worker = subprocess.Popen(
                [*TRAWLER, "worker", *connect, "--warc-dir", str(warc), "--exit-when-idle",
                 "--worker-id", log.stem],
                stdout=subprocess.DEVNULL, stderr=stderr, text=True,
            )  # fmt: skip
        self.workers.append(worker)
        return worker

    def stop(self) -> None:
        """Workers of a crawl that failed its time bound are killed, not left running."""
        for worker in self.workers:
            if worker.poll() is None:
                worker.kill()
                worker.wait(10)


def redis_url_for(request: pytest.FixtureRequest) -> str:
    """The Redis a fixture of ``request``'s scope may use: the session's, emptied for
    each test, or for a module-scoped fixture a redis-server of the module's own
    (tests/conftest.py)."""
    name = "redis_url" if request.scope == "function" else "module_redis_url"
    return str(request.getfixturevalue(name))


def open_backend(request: pytest.FixtureRequest, name: str, tmp: Path) -> CrawlBackend:
    """The backend ``name``; distributed: the session's redis-server, a fresh database."""
    if name == "embedded":
        return EmbeddedCrawls(tmp)
    import uuid

    redis_url = redis_url_for(request)
    postgres = request.getfixturevalue("postgres_server")
    database = postgres.create_database(f"t_{uuid.uuid4().hex[:12]}")
    return DistributedCrawls(tmp, redis_url, database)


def close_backend(backend: CrawlBackend) -> None:
    if isinstance(backend, DistributedCrawls):
        backend.stop()


def _wait_bounded(workers: list[subprocess.Popen[str]], timeout_s: float) -> int:
    """The first non-zero exit status of ``workers``; any still running after
    ``timeout_s`` are killed and the crawl counts as failed (-1)."""
    deadline = time.monotonic() + timeout_s
    status = 0
    for worker in workers:
        try:
            code = worker.wait(max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            worker.kill()
            worker.wait(10)
            code = -1
        status = status or code
    return status


def writer_of(row: dict) -> str:
    """Which process stored ``row``: its WARC file's prefix (trawler-<worker id>, or
    trawler for `trawler crawl`), before the -<stamp>-<serial>-<token> WarcWriter adds."""
    return row["warc_file"].rsplit("-", 3)[0]
