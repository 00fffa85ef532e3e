"""``--concurrency`` is the number of requests in flight, read from the server's log.

A URL's task holds a request slot only while it talks to the host. Before, it
also held it while it waited out the host's interval after robots.txt: with
``--concurrency 4`` and ``--delay 2``, sixteen new hosts started three at a time
(a quarter of the slots is kept for hosts known to answer), one group every
~2.2 s (~12 s for the last). Now their robots.txt go out at once, and each
host's first page follows its robots.txt by the delay: the last starts ~2.7 s in.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.conftest import run_trawler
from tests.e2e.runner_site import CLOCK_SLACK_S, LatencyServer, min_gaps, overlaps, serve

pytestmark = pytest.mark.timeout(120)

HOSTS = 16
CONCURRENCY = 4
DELAY_S = 2.0
LATENCY_S = 0.1


@pytest.fixture
def server(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[LatencyServer]:
    yield from serve(tmp_path, request)


def most_in_flight(entries: list[dict]) -> int:
    """The most requests (any host) the server was answering at one moment."""
    edges = sorted([(e["t"], 1) for e in entries] + [(e["done"], -1) for e in entries])
    current = peak = 0
    for _, step in edges:  # at a tie the end sorts first: back to back is not overlap
        current += step
        peak = max(peak, current)
    return peak


@pytest.mark.parametrize("server", [(HOSTS, 2, LATENCY_S)], indirect=True)
def test_waiting_hosts_hold_no_request_slot(server: LatencyServer, tmp_path: Path) -> None:
    out = run_trawler(
        "crawl", *server.seeds, "--data", str(tmp_path / "data"), "--allow-private",
        "--concurrency", str(CONCURRENCY), "--delay", str(DELAY_S), "--max-depth", "0",
        "--no-sitemaps", "--parse-processes", "0", "-q",
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    log = server.log()
    homes = {e["host"]: e["t"] for e in log if e["path"] == "/"}
    assert len(homes) == HOSTS
    started = min(e["t"] for e in log)
    # Each host: robots.txt, then its home page a delay later, never closer.
    assert not overlaps(log)
    assert min(min_gaps(log).values()) >= DELAY_S - CLOCK_SLACK_S
    # The bound holds, and slots are shared by several hosts (so this test sees it).
    assert 2 <= most_in_flight(log) <= CONCURRENCY
    # Before: the last home page came ~12 s in (6 groups x (delay + 2 answers)).
    last_home = max(homes.values()) - started
    assert last_home < DELAY_S + 2.5, f"the last host started {last_home:.1f} s in"
