"""A crawl of more hosts than the process may hold descriptors: every page is fetched.

Each host's keep-alive connection was kept idle for 15 s whatever the number of
hosts: with a descriptor limit of 256 (the hard limit, so the process cannot raise
it) and 300 hosts, connections to new hosts failed with EMFILE ("Too many open
files") and their pages ended as connect errors. The idle connections of a process
are now bounded by what its descriptor limit leaves (connectors.py).
"""

from __future__ import annotations

import resource
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.conftest import Served, export_rows, start_testsite

pytestmark = pytest.mark.timeout(180)

HOSTS = 300
NOFILE = 256


@pytest.fixture
def wide_site(tmp_path: Path) -> Iterator[Served]:
    served = start_testsite(tmp_path, hosts=HOSTS, pages=2)
    yield served
    served.process.terminate()
    served.process.wait(10)


def _limit_descriptors() -> None:
    resource.setrlimit(resource.RLIMIT_NOFILE, (NOFILE, NOFILE))


def test_more_hosts_than_descriptors(wide_site: Served, tmp_path: Path) -> None:
    data = tmp_path / "data"
    cmd = [sys.executable, "-m", "trawler", "crawl", *wide_site.seeds, "--data", str(data),
           "--allow-private", "--delay", "0.2", "--max-depth", "1", "--no-sitemaps",
           "--concurrency", "64", "--max-attempts", "1", "-q"]  # fmt: skip
    out = subprocess.run(
        cmd, capture_output=True, text=True, timeout=170, preexec_fn=_limit_descriptors
    )
    assert out.returncode == 0, out.stderr[-2000:]
    rows = export_rows(data)
    failed = [(r["url"], r["error"]) for r in rows if r["error"] in ("connect", "timeout")]
    assert not failed, f"{len(failed)} pages failed, e.g. {failed[:3]}"
    fetched = {r["url"] for r in rows}
    homes = {seed for seed in wide_site.seeds}
    assert homes <= fetched
    assert len(rows) >= 3 * HOSTS  # /, p/0.html, p/1.html ... of every host
