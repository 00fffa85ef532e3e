"""``LocalJobs``, the embedded job service of a data directory (the Python API and
what `trawler serve --data` runs), against a real site judged from its access log:
submit, the running-jobs limit, restart, and one runner per job across processes."""

from __future__ import annotations

import asyncio
import os
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.conftest import run_trawler
from tests.e2e.runner_site import LatencyServer, fetched_urls, job_config, serve, stored_urls
from trawler.jobs.layout import job_dir
from trawler.jobs.local import LocalJobs, NoFreeSlot
from trawler.jobs.model import JobState
from trawler.locks import JobBusy, lock_job
from trawler.services import Services

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
def server(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[LatencyServer]:
    yield from serve(tmp_path, request)


def light() -> Services:
    return Services(parse_processes=0)


def jobs_of(data: Path, **options: object) -> LocalJobs:
    return LocalJobs(data, services=light, follow_interval_s=0.2, **options)  # type: ignore[arg-type]


def check_complete(
    server: LatencyServer, data: Path, job_id: str, ua: str, hosts: list[int]
) -> None:
    fetched = fetched_urls(server.log(ua))
    expected = server.site.reachable([server.seeds[i] for i in hosts], None, "host")
    assert set(fetched) == set(expected) == stored_urls(job_dir(data, job_id))
    assert max(fetched.values()) == 1, [u for u, n in fetched.items() if n > 1]


async def test_submit_watch_and_finish(server: LatencyServer, tmp_path: Path) -> None:
    data = tmp_path / "data"
    async with jobs_of(data) as jobs:
        job_id = await jobs.submit(server.seeds[:2], job_config("A", 0.05))
        assert await jobs.wait(job_id, 60) is JobState.FINISHED
        info = await jobs.info(job_id)
        assert info.pages_crawled > 0 and info.options["user_agent"] == "A/1.0"
        assert [e.to_state for e in info.events] == [
            JobState.PENDING, JobState.RUNNING, JobState.FINISHED,
        ]  # fmt: skip
        assert "seeds" not in info.options
    check_complete(server, data, job_id, "A/1.0", [0, 1])


@pytest.mark.parametrize("server", [(3, 8, 0.05)], indirect=True)
async def test_a_job_over_the_limit_stays_pending_until_a_slot_frees(
    server: LatencyServer, tmp_path: Path
) -> None:
    """With one slot, B waits (no request of its own) while A runs, then runs to
    its end. Without the limit B's requests would start at once: the first check fails."""
    data = tmp_path / "data"
    async with jobs_of(data, max_running_jobs=1) as jobs:
        a = await jobs.submit(server.seeds[:1], job_config("A", 0.2))
        b = await jobs.submit(server.seeds[1:3], job_config("B", 0.05))
        assert (await jobs.info(b)).state is JobState.PENDING
        with pytest.raises(NoFreeSlot):
            await jobs.resume(b)  # no slot: it stays pending
        assert await jobs.wait(a, 60) is JobState.FINISHED
        a_done = max(e["done"] for e in server.log("A/1.0"))
        assert await jobs.wait(b, 60) is JobState.FINISHED
    b_log = server.log("B/1.0")
    assert b_log and min(e["t"] for e in b_log) >= a_done - 0.05, "B ran before A ended"
    check_complete(server, data, b, "B/1.0", [1, 2])


async def test_no_slot_at_all_accepts_jobs_and_fetches_nothing(
    server: LatencyServer, tmp_path: Path
) -> None:
    data = tmp_path / "data"
    async with jobs_of(data, max_running_jobs=0) as jobs:
        job_id = await jobs.submit(server.seeds[:2], job_config("Z", 0.0))
        await asyncio.sleep(1.0)
        assert (await jobs.info(job_id)).state is JobState.PENDING
        assert (await jobs.info(job_id)).urls_queued == 2  # its seeds are in its frontier
    assert server.log("Z/1.0") == []
    async with jobs_of(data) as jobs:  # a process with slots runs it
        assert await jobs.wait(job_id, 60) is JobState.FINISHED
    check_complete(server, data, job_id, "Z/1.0", [0, 1])


@pytest.mark.parametrize("server", [(2, 12, 0.05)], indirect=True)
async def test_closing_pauses_and_the_next_process_resumes(
    server: LatencyServer, tmp_path: Path
) -> None:
    data = tmp_path / "data"
    async with jobs_of(data) as jobs:
        job_id = await jobs.submit(server.seeds[:2], job_config("A", 0.1))
        for _ in range(300):
            if len(server.log("A/1.0")) >= 6:
                break
            await asyncio.sleep(0.05)
    info = await LocalJobs(data).store.get(job_id)
    assert info.state is JobState.PAUSED and info.events[-1].reason == "shutdown"
    stopped_with = len(server.log("A/1.0"))
    reachable = server.site.reachable(server.seeds[:2], None, "host")
    assert stopped_with < len(reachable)  # stopped before its end: the resume has work to do
    async with jobs_of(data) as jobs:
        assert await jobs.wait(job_id, 60) is JobState.FINISHED
    check_complete(server, data, job_id, "A/1.0", [0, 1])


def hold_job_lock(data: Path, job_id: str) -> subprocess.Popen[str]:
    """Another process holding the job's lock, as a `trawler crawl` running it does."""
    code = (
        "import sys, time; from pathlib import Path; from trawler.locks import lock_job; "
        "h = lock_job(Path(sys.argv[1]), sys.argv[2]); print('held', flush=True); time.sleep(60)"
    )
    holder = subprocess.Popen(
        [sys.executable, "-c", code, str(job_dir(data, job_id)), job_id],
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
    return holder


async def test_a_job_another_process_runs_is_not_run_twice(
    server: LatencyServer, tmp_path: Path
) -> None:
    """A job left running whose lock another process holds is not adopted; once that
    process is gone it is. (Without the lock check the first wait would finish.)"""
    data = tmp_path / "data"
    async with jobs_of(data, max_running_jobs=0) as jobs:
        job_id = await jobs.submit(server.seeds[:1], job_config("A", 0.0))
        await jobs.store.transition(job_id, JobState.RUNNING, "started")  # as a crawl does
    holder = hold_job_lock(data, job_id)
    try:
        async with jobs_of(data) as jobs:
            assert await jobs.wait(job_id, 1.5) is JobState.RUNNING
            assert not jobs.runs(job_id) and server.log("A/1.0") == []
            await jobs.pause(job_id)  # through the store: the other process follows it
            assert (await jobs.info(job_id)).state is JobState.PAUSED
            await jobs.resume(job_id)
            assert not jobs.runs(job_id)
    finally:
        holder.kill()
        holder.wait(10)
    async with jobs_of(data) as jobs:  # its process is gone: this one resumes it
        assert await jobs.wait(job_id, 60) is JobState.FINISHED
        reasons = [e.reason for e in (await jobs.info(job_id)).events]
        assert "process gone" in reasons
    check_complete(server, data, job_id, "A/1.0", [0])


async def test_a_job_run_here_cannot_be_locked_elsewhere(
    server: LatencyServer, tmp_path: Path
) -> None:
    data = tmp_path / "data"
    async with jobs_of(data) as jobs:
        job_id = await jobs.submit(server.seeds[:2], job_config("A", 0.3))
        assert jobs.runs(job_id)
        with pytest.raises(JobBusy, match=f"pid {os.getpid()}"):
            lock_job(job_dir(data, job_id), job_id).close()
        await jobs.cancel(job_id)
        assert not jobs.runs(job_id)
    lock_job(job_dir(data, job_id), job_id).close()  # free once the run ended


@pytest.mark.parametrize("server", [(2, 12, 0.05)], indirect=True)
async def test_a_job_run_here_follows_trawler_jobs_pause_and_resume(
    server: LatencyServer, tmp_path: Path
) -> None:
    """`trawler jobs pause` from a shell changes the store; the runner here follows
    within 2 s (without the follower, A's requests go on: the first check fails)."""
    data = tmp_path / "data"
    async with jobs_of(data) as jobs:
        job_id = await jobs.submit(server.seeds[:2], job_config("A", 0.1))
        for _ in range(300):
            if len(server.log("A/1.0")) >= 6:
                break
            await asyncio.sleep(0.05)
        command = ("--data", str(data))
        paused = await asyncio.to_thread(run_trawler, "jobs", "pause", job_id, *command)
        assert paused.returncode == 0, paused.stderr
        paused_at = time.time()
        await asyncio.sleep(3.0)
        assert not [e for e in server.log("A/1.0") if e["t"] > paused_at + 2.0]
        assert jobs.runs(job_id) and (await jobs.info(job_id)).state is JobState.PAUSED
        resumed = await asyncio.to_thread(
            run_trawler, "jobs", "resume", job_id, "--data", str(data)
        )
        assert resumed.returncode == 0 and "no crawl runs" not in resumed.stderr  # it runs here
        assert await jobs.wait(job_id, 60) is JobState.FINISHED
    check_complete(server, data, job_id, "A/1.0", [0, 1])


async def test_a_crawl_started_later_obeys_the_stored_controls(
    server: LatencyServer, tmp_path: Path
) -> None:
    """Blocked through the job service (as the API does), then `trawler crawl` of the
    same data directory: not one request to the blocked host, not even its robots.txt."""
    data = tmp_path / "data"
    async with jobs_of(data) as jobs:
        await jobs.block(server.site.address(0), "complaint")
    out = await asyncio.to_thread(
        run_trawler, "crawl", *server.seeds[:2], "--data", str(data), "--allow-private",
        "--no-sitemaps", "--delay", "0", "--user-agent", "C/1.0", "-q",
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    hosts = {e["host"] for e in server.log("C/1.0")}
    assert hosts == {server.site.netloc(1)}, hosts


async def test_a_finished_job_is_revisited_at_once(server: LatencyServer, tmp_path: Path) -> None:
    """``recrawl`` right after ``wait`` (the job's run may still be ending here: its
    lock not yet freed) starts a pass: every stored page asked once more, the job
    running, then finished again."""
    data = tmp_path / "data"
    async with jobs_of(data) as jobs:
        job_id = await jobs.submit(server.seeds[:1], job_config("A", 0.05))
        assert await jobs.wait(job_id, 60) is JobState.FINISHED
        mark = len(server.log("A/1.0"))
        await jobs.recrawl(job_id)
        assert (await jobs.info(job_id)).state is JobState.RUNNING
        assert await jobs.wait(job_id, 60) is JobState.FINISHED
        events = (await jobs.info(job_id)).events
    assert [(e.to_state, e.reason) for e in events[-2:]] == [
        (JobState.RUNNING, "recrawl"), (JobState.FINISHED, "recrawl done"),
    ]  # fmt: skip
    revisited = fetched_urls(server.log("A/1.0")[mark:])
    assert set(revisited) == html_pages(job_dir(data, job_id)) and max(revisited.values()) == 1


def html_pages(job_data: Path) -> set[str]:
    """The stored pages a pass revisits: 2xx, HTML or a download that is not
    (``not_html``: revisited by conditional GET too)."""
    with sqlite3.connect(job_data / "trawler.db") as conn:
        rows = conn.execute("SELECT url FROM pages WHERE kind = 'page' AND status BETWEEN"
                            " 200 AND 299 AND (error IS NULL OR error = 'not_html')")  # fmt: skip
        return {url for (url,) in rows}
