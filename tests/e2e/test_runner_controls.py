"""Operators' controls on a running JobRunner, judged from the web server's access log:
politeness settings applied live, and the domain blocklist."""

from __future__ import annotations

import asyncio
import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.runner_site import (
    CLOCK_SLACK_S,
    LatencyServer,
    backends,
    job_config,
    serve,
    wait_for,
)
from trawler.jobs.model import JobState
from trawler.jobs.runner import JobRunner
from trawler.services import PolitenessSettings
from trawler.store.sqlite import DB_NAME

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
def server(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[LatencyServer]:
    yield from serve(tmp_path, request)


def gaps_after(entries: list[dict], since: float) -> list[float]:
    """Start-to-start gaps between consecutive requests to one host, the second after ``since``."""
    by_host: dict[str, list[float]] = {}
    for entry in entries:
        by_host.setdefault(entry["host"], []).append(entry["t"])
    gaps = []
    for times in by_host.values():
        times.sort()
        gaps += [b - a for a, b in zip(times, times[1:], strict=False) if b > since]
    return gaps


def in_flight_together(entries: list[dict]) -> int:
    """Requests (to any host) that arrived while another one's answer was not ready."""
    entries = sorted(entries, key=lambda e: e["t"])
    return sum(1 for a, b in zip(entries, entries[1:], strict=False) if b["t"] < a["done"])


@pytest.mark.parametrize("server", [(2, 12, 0.02)], indirect=True)
async def test_delay_changed_live(server: LatencyServer, tmp_path: Path) -> None:
    runner = JobRunner(backends(tmp_path))
    await runner.start("A", job_config("A", 0.1), [server.seeds[:2]])
    await wait_for(lambda: len(server.log()) >= 6, 30)
    runner.set_politeness(PolitenessSettings(delay_s=0.6))
    slowed_at = time.time()
    await asyncio.sleep(2.5)
    runner.set_politeness(PolitenessSettings())  # back to the job's own 0.1 s
    restored_at = time.time()
    assert await runner.wait("A", 60) is JobState.FINISHED
    log = server.log()
    # A request already on its way at the change may arrive just after it.
    slowed = gaps_after([e for e in log if e["t"] < restored_at], slowed_at + 0.05)
    assert len(slowed) >= 4 and min(slowed) >= 0.6 - CLOCK_SLACK_S, slowed
    restored = gaps_after(log, restored_at + 0.7)
    assert restored and min(restored) < 0.5  # the check can fail: faster again
    await runner.close()


@pytest.mark.parametrize("server", [(3, 12, 0.1)], indirect=True)
async def test_concurrency_over_all_jobs_changed_live(
    server: LatencyServer, tmp_path: Path
) -> None:
    runner = JobRunner(backends(tmp_path))
    runner.set_politeness(PolitenessSettings(concurrency=1))
    await runner.start("A", job_config("A", 0.0), [server.seeds[:2]])
    await runner.start("B", job_config("B", 0.0), [server.seeds[2:]])
    await asyncio.sleep(2.0)
    runner.set_politeness(PolitenessSettings(concurrency=None))
    lifted_at = time.time()
    for job in ("A", "B"):
        assert await runner.wait(job, 60) is JobState.FINISHED
    log = server.log()
    assert in_flight_together([e for e in log if e["t"] < lifted_at]) == 0
    assert in_flight_together([e for e in log if e["t"] > lifted_at]) > 0  # can fail
    await runner.close()


@pytest.mark.parametrize("server", [(2, 12, 0.02)], indirect=True)
async def test_blocked_domain_gets_no_further_request(
    server: LatencyServer, tmp_path: Path
) -> None:
    """Seeded on host 0 only, with scope any: host 1 is reached by links."""
    blocked_host = server.site.netloc(1)
    runner = JobRunner(backends(tmp_path))
    await runner.start("A", job_config("A", 0.2, scope="any"), [server.seeds[:1]])
    await wait_for(lambda: sum(e["host"] == blocked_host for e in server.log()) >= 3, 30)
    entry = runner.block(server.site.address(1), "complaint")
    blocked_at = time.time()
    assert [b.domain for b in runner.blocklist()] == [entry.domain]
    assert await runner.wait("A", 60) is JobState.FINISHED
    late = [e for e in server.log() if e["host"] == blocked_host and e["t"] > blocked_at + 0.05]
    assert not late, late
    conn = sqlite3.connect(tmp_path / "A" / DB_NAME)
    skipped = conn.execute(
        "SELECT count(*) FROM urls WHERE host = ? AND reason = 'blocklist'", (blocked_host,)
    ).fetchone()[0]
    rejected = conn.execute(
        "SELECT value FROM counters WHERE name = 'rejected.blocklist'"
    ).fetchone()
    conn.close()
    assert skipped > 0  # its queued URLs, recorded with the reason
    assert rejected is not None and rejected[0] > 0  # new links to it, dropped
    await runner.close()
