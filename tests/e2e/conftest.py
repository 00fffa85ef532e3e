"""End-to-end fixtures: the generated test web served by a separate process,
its access log (the server's own clock), and the real `trawler` command."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from tests.servers import prioritise
from trawler.sitegen import Site, SiteSpec

if TYPE_CHECKING:  # backends.py imports this module
    from tests.e2e.backends import CrawlBackend


@dataclass
class Served:
    site: Site
    seeds: list[str]
    log_path: Path
    process: subprocess.Popen[str]

    def log(self) -> list[dict]:
        """The server's access log, one dict a request, in arrival order."""
        lines = self.log_path.read_text().splitlines()
        return [json.loads(line) for line in lines if line.strip()]


def start_testsite(tmp: Path, *extra: str, hosts: int = 3, pages: int = 15) -> Served:
    log_path = tmp / "access.jsonl"
    cmd = [sys.executable, "-m", "trawler.testsite", "--hosts", str(hosts), "--pages",
           str(pages), "--port", "0", "--access-log", str(log_path), *extra]  # fmt: skip
    process = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
    prioritise(process)
    seeds = []
    deadline = time.monotonic() + 20
    assert process.stdout is not None
    for line in process.stdout:
        if line.strip() == "ready":
            break
        seeds.append(line.strip())
        if time.monotonic() > deadline:
            break
    else:
        raise RuntimeError("test site did not start")
    port = int(seeds[0].rsplit(":", 1)[1].split("/")[0])
    spec_args = dict(zip(extra[::2], extra[1::2], strict=False))
    spec = SiteSpec(
        hosts=hosts, pages=pages, port=port,
        disallow_fraction=float(spec_args.get("--disallow-fraction", 1.0)),
        crawl_delay_hosts=int(spec_args.get("--crawl-delay-hosts", 0)),
        crawl_delay_s=float(spec_args.get("--crawl-delay", 1.0)),
    )  # fmt: skip
    return Served(Site(spec), seeds, log_path, process)


@pytest.fixture
def testsite(tmp_path: Path) -> Iterator[Served]:
    served = start_testsite(tmp_path)
    yield served
    served.process.terminate()
    served.process.wait(10)


@dataclass
class LoggedSite:
    """A test server of ours in a child process (``python -m MODULE``): it prints its
    base URL, then ``ready``, and writes an access log of JSON lines."""

    seed: str
    log_path: Path
    process: subprocess.Popen[str]

    def log(self) -> list[dict]:
        return [json.loads(line) for line in self.log_path.read_text().splitlines() if line]


def start_logged_site(module: str, tmp: Path, *extra: str) -> LoggedSite:
    log_path = tmp / "access.jsonl"
    cmd = [sys.executable, "-m", module, "--access-log", str(log_path), *extra]
    process = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
    prioritise(process)
    assert process.stdout is not None
    seed = process.stdout.readline().strip()
    assert process.stdout.readline().strip() == "ready"
    return LoggedSite(seed, log_path, process)


def run_trawler(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """Run the real command line in a child process."""
    return subprocess.run(
        [sys.executable, "-m", "trawler", *args],
        capture_output=True, text=True, timeout=timeout,
    )  # fmt: skip


def until(check: Callable[[], bool], timeout_s: float) -> bool:
    """Whether ``check()`` came true within ``timeout_s`` (polled every 0.2 s)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(0.2)
    return False


def job_data(data: Path, job: str | None = None) -> Path:
    """Where a job's crawl data is in DATA (DATA/jobs/<id>/): the newest job's by default."""
    from trawler.jobs.layout import find_job_dir

    return find_job_dir(data, job)


def export_rows(data: Path) -> list[dict]:
    out = run_trawler("export", "--data", str(data), "--format", "jsonl", "--include-noindex")
    assert out.returncode == 0, out.stderr
    return [json.loads(line) for line in out.stdout.splitlines()]


@pytest.fixture(params=["embedded", "distributed"])
def crawl_backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[CrawlBackend]:
    """Crawls run by `trawler crawl`, or by `trawler submit` and two workers
    (tests/e2e/backends.py): the behavioural tests run once on each."""
    from tests.e2e.backends import close_backend, open_backend

    backend = open_backend(request, request.param, tmp_path)
    yield backend
    close_backend(backend)
