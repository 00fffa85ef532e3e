"""Many jobs in one process (jobs/runner.py), judged from the web server's access log:
politeness per host across jobs, pause and resume, cancel. The server runs in a
process of its own (tests/e2e/latency_site.py) and logs when each request arrived
and when its answer was ready, on its own clock."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.runner_site import (
    CLOCK_SLACK_S,
    LatencyServer,
    backends,
    fetched_urls,
    job_config,
    min_gaps,
    overlaps,
    serve,
    stored_urls,
    wait_for,
)
from trawler.jobs.model import InvalidTransition, JobState, UnknownJob
from trawler.jobs.runner import JobRunner
from trawler.services import Services

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
def server(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[LatencyServer]:
    yield from serve(tmp_path, request)


async def three_overlapping_jobs(server: LatencyServer, root: Path, shared: bool) -> None:
    """Jobs A (hosts 0, 1), B (1, 2), C (0, 1, 2), each with --delay 0.3; host 1 is
    crawled by all three. ``shared``: one Services for all (as the runner does),
    with one parser process for the three; else each job its own, parsing inline."""
    seeds = server.seeds
    plan = {"A": [seeds[0], seeds[1]], "B": [seeds[1], seeds[2]], "C": seeds[:3]}
    services = Services(parse_processes=1)
    one = JobRunner(backends(root), services)
    runners = {name: one if shared else JobRunner(backends(root)) for name in plan}
    parsing = {"parse_processes": None} if shared else {}
    try:
        for name, job_seeds in plan.items():
            await runners[name].start(name, job_config(name, 0.3, **parsing), [job_seeds])
        for name, runner in runners.items():
            assert await runner.wait(name, 60) is JobState.FINISHED
    finally:
        for runner in set(runners.values()):
            await runner.close()
        await services.close()


async def test_three_jobs_share_politeness_per_host(server: LatencyServer, tmp_path: Path) -> None:
    await three_overlapping_jobs(server, tmp_path, shared=True)
    log = server.log()
    assert not overlaps(log), overlaps(log)[:3]
    gaps = min_gaps(log)
    assert len(gaps) == 3 and min(gaps.values()) >= 0.3 - CLOCK_SLACK_S, gaps
    for name, hosts in {"A": (0, 1), "B": (1, 2), "C": (0, 1, 2)}.items():
        fetched = fetched_urls(server.log(f"{name}/1.0"))
        expected = server.site.reachable([server.seeds[i] for i in hosts], None, "host")
        assert set(fetched) == set(expected) == stored_urls(tmp_path / name)
        assert max(fetched.values()) == 1  # each job fetched each of its URLs once


async def test_the_politeness_check_fails_without_shared_services(
    server: LatencyServer, tmp_path: Path
) -> None:
    """The same three jobs, each with services of its own: the log shows it."""
    await three_overlapping_jobs(server, tmp_path, shared=False)
    log = server.log()
    assert overlaps(log) or min(min_gaps(log).values()) < 0.3 - CLOCK_SLACK_S


@pytest.mark.parametrize("server", [(4, 12, 0.05)], indirect=True)
async def test_pause_stops_requests_and_resume_loses_nothing(
    server: LatencyServer, tmp_path: Path
) -> None:
    runner = JobRunner(backends(tmp_path))
    await runner.start("A", job_config("A", 0.1), [server.seeds[:2]])
    await runner.start("B", job_config("B", 0.3), [server.seeds[2:4]])
    await wait_for(lambda: len(server.log("A/1.0")) >= 6, 30)
    await runner.pause("A")
    paused_at = time.time()
    with pytest.raises(InvalidTransition):
        await runner.pause("A")
    await asyncio.sleep(3.0)
    late = [e for e in server.log("A/1.0") if e["t"] > paused_at + 2.0]
    assert not late, late
    assert [e for e in server.log("B/1.0") if e["t"] > paused_at + 1.0]  # B went on
    assert runner.state("A") is JobState.PAUSED
    await runner.resume("A")
    assert await runner.wait("A", 60) is JobState.FINISHED
    fetched = fetched_urls(server.log("A/1.0"))
    expected = server.site.reachable(server.seeds[:2], None, "host")
    assert set(fetched) == set(expected) == stored_urls(tmp_path / "A")
    assert max(fetched.values()) == 1, [u for u, n in fetched.items() if n > 1]
    assert [e.to_state for e in runner.job("A").events] == [
        JobState.RUNNING, JobState.PAUSED, JobState.RUNNING, JobState.FINISHED,
    ]  # fmt: skip
    await runner.close()


@pytest.mark.parametrize("server", [(2, 12, 0.05)], indirect=True)
async def test_cancel_keeps_what_was_stored(server: LatencyServer, tmp_path: Path) -> None:
    runner = JobRunner(backends(tmp_path))
    await runner.start("A", job_config("A", 0.1), [server.seeds[:2]])
    await wait_for(lambda: len(server.log("A/1.0")) >= 6, 30)
    await runner.cancel("A")
    cancelled_at = time.time()
    assert runner.state("A") is JobState.CANCELLED
    with pytest.raises(InvalidTransition):
        await runner.resume("A")
    with pytest.raises(UnknownJob):
        await runner.pause("nope")
    await asyncio.sleep(0.5)
    log = server.log("A/1.0")
    assert not [e for e in log if e["t"] > cancelled_at]
    fetched = fetched_urls(log)
    expected = server.site.reachable(server.seeds[:2], None, "host")
    assert 0 < len(fetched) < len(expected)  # stopped part-way
    assert set(fetched) == stored_urls(tmp_path / "A")  # every page it fetched is stored
    await runner.close()


async def test_a_job_paused_by_an_earlier_process_is_resumed_and_recorded(
    server: LatencyServer, tmp_path: Path
) -> None:
    """The event sink (the job store) sees every change, the first one from paused."""
    recorded = []
    runner = JobRunner(backends(tmp_path), on_event=recorded.append)
    await runner.start("A", job_config("A", 0.0), [server.seeds[:1]], current=JobState.PAUSED)
    assert await runner.wait("A", 60) is JobState.FINISHED
    await runner.close()
    assert [(e.from_state, e.to_state, e.reason) for e in recorded] == [
        (JobState.PAUSED, JobState.RUNNING, "start"),
        (JobState.RUNNING, JobState.FINISHED, "complete"),
    ]
    with pytest.raises(InvalidTransition):
        await runner.start("B", job_config("B", 0.0), current=JobState.FINISHED)
    assert not (tmp_path / "B").exists()  # refused before its backend was opened


async def test_a_job_cancelled_as_it_starts_ends_cleanly(
    server: LatencyServer, tmp_path: Path
) -> None:
    runner = JobRunner(backends(tmp_path))
    await runner.start("A", job_config("A", 0.0), [server.seeds[:1]])
    await runner.cancel("A")  # before its crawler has opened its store
    assert runner.state("A") is JobState.CANCELLED
    await runner.close()


@pytest.mark.parametrize("server", [(1, 4, 0.02)], indirect=True)
async def test_each_gap_holds_the_longer_interval_of_the_two_jobs(
    server: LatencyServer, tmp_path: Path
) -> None:
    """One host, jobs of --delay 0.15 and 0.45: a gap next to a request of the slower
    job is at least 0.45 s (its request came that long after the last one, or the
    next one waited its next-allowed time); two of the faster job's may be 0.15 s."""
    delays = {"Fast/1.0": 0.15, "Slow/1.0": 0.45}
    runner = JobRunner(backends(tmp_path))
    for name in ("Fast", "Slow"):
        await runner.start(name, job_config(name, delays[f"{name}/1.0"]), [server.seeds])
    for name in ("Fast", "Slow"):
        assert await runner.wait(name, 60) is JobState.FINISHED
    await runner.close()
    log = sorted(server.log(), key=lambda e: e["t"])
    pairs = list(zip(log, log[1:], strict=False))
    short = [
        (a["ua"], b["ua"], round(b["t"] - a["t"], 3))
        for a, b in pairs
        if b["t"] - a["t"] < max(delays[a["ua"]], delays[b["ua"]]) - CLOCK_SLACK_S
    ]
    assert not short, short
    assert any(a["ua"] == b["ua"] == "Fast/1.0" for a, b in pairs)  # both kinds of gap seen
    assert any("Slow/1.0" in (a["ua"], b["ua"]) for a, b in pairs)


@pytest.mark.parametrize("server", [(1, 4, 0.02)], indirect=True)
async def test_jobs_of_one_fetch_profile_read_robots_txt_once(
    server: LatencyServer, tmp_path: Path
) -> None:
    """Same User-Agent, same reach: the second job takes the first one's robots.txt
    from the process's cache (each with its own frontier, which could not share it)."""
    runner = JobRunner(backends(tmp_path))
    await runner.start("X", job_config("Same", 0.05), [server.seeds])
    await wait_for(lambda: len(server.log()) >= 3, 30)
    await runner.start("Y", job_config("Same", 0.05), [server.seeds])
    for job in ("X", "Y"):
        assert await runner.wait(job, 60) is JobState.FINISHED
    await runner.close()
    assert [e["path"] for e in server.log()].count("/robots.txt") == 1
    assert stored_urls(tmp_path / "X") == stored_urls(tmp_path / "Y")


@pytest.mark.parametrize("server", [(2, 12, 0.02)], indirect=True)
async def test_a_paused_job_can_be_cancelled(server: LatencyServer, tmp_path: Path) -> None:
    runner = JobRunner(backends(tmp_path))
    await runner.start("A", job_config("A", 0.1), [server.seeds])
    await wait_for(lambda: len(server.log()) >= 4, 30)
    await runner.pause("A")
    await asyncio.wait_for(runner.cancel("A"), 10)  # the paused dispatcher wakes to stop
    assert runner.state("A") is JobState.CANCELLED
    assert set(fetched_urls(server.log())) == stored_urls(tmp_path / "A")
    await runner.close()
