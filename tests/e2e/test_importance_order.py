"""End-to-end: `--priority importance` fetches the most-linked pages of a skewed web
earlier than the depth order does, read from the server's access log (issue 18)."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.e2e.cli_checks import assert_one_line_error
from tests.e2e.conftest import run_trawler
from tests.servers import prioritise
from trawler.skewweb import Page, SkewSpec, SkewWeb, early_share

SPEC = SkewSpec(hosts=4, pages=200, seed=1)
MARGIN = 0.12  # importance's share must beat depth's by this much (measured: ~0.25)


@dataclass
class SkewSite:
    seeds: list[str]
    log_path: Path
    process: subprocess.Popen[str]

    def fetched(self, skip: int = 0) -> list[Page]:
        """Pages in the order requests arrived (robots.txt left out), after ``skip`` lines."""
        import json

        hosts = {seed.split("/")[2]: i for i, seed in enumerate(self.seeds)}
        order = []
        for line in self.log_path.read_text().splitlines()[skip:]:
            entry = json.loads(line)
            number = SkewWeb.page_of(entry["path"])
            if number is not None:
                order.append((hosts[entry["host"]], number))
        return order

    def lines(self) -> int:
        return len(self.log_path.read_text().splitlines())


@pytest.fixture
def skew_site(tmp_path: Path) -> Iterator[SkewSite]:
    log_path = tmp_path / "access.jsonl"
    cmd = [sys.executable, "-m", "trawler.skewweb", "--hosts", str(SPEC.hosts), "--pages",
           str(SPEC.pages), "--seed", str(SPEC.seed), "--access-log", str(log_path)]  # fmt: skip
    process = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
    prioritise(process)
    assert process.stdout is not None
    seeds = [line.strip() for line in iter(process.stdout.readline, "ready\n")]
    yield SkewSite(seeds, log_path, process)
    process.terminate()
    process.wait(10)


def crawl_in_order(site: SkewSite, data: Path, priority: str) -> list[Page]:
    before = site.lines()
    out = run_trawler(
        "crawl", *site.seeds, "--data", str(data), "--allow-private", "-q", "--no-sitemaps",
        "--scope", "any", "--delay", "0", "--priority", priority,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    return site.fetched(before)


def test_importance_fetches_the_most_linked_pages_first(
    skew_site: SkewSite, tmp_path: Path
) -> None:
    web = SkewWeb(SPEC)
    top = web.top(0.1)
    shares = {}
    for priority in ("depth", "importance"):
        fetched = crawl_in_order(skew_site, tmp_path / priority, priority)
        assert sorted(fetched) == sorted(web.out), "every page once, in either order"
        shares[priority] = early_share(top, fetched, 0.2)
    assert shares["importance"] >= shares["depth"] + MARGIN, shares


def test_bad_priority_is_a_usage_error(tmp_path: Path) -> None:
    out = run_trawler(
        "crawl", "http://127.0.0.1:9/", "--data", str(tmp_path), "--priority", "pagerank"
    )
    assert out.returncode == 2
    assert "pagerank" in out.stderr and "Traceback" not in out.stderr


def test_importance_with_the_distributed_backend_is_a_usage_error() -> None:
    """The Redis queues are FIFOs: refused before any server is contacted."""
    out = run_trawler("submit", "http://127.0.0.1:9/", "--redis", "redis://127.0.0.1:9/0",
                      "--postgres", "postgresql://127.0.0.1:9/x", "--priority", "importance",
                      timeout=30)  # fmt: skip
    assert "--priority importance" in assert_one_line_error(out, 2)
