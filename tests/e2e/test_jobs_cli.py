"""Jobs from the command line: `trawler crawl` through the job store, `trawler jobs`
on a data directory and on PostgreSQL, and the one-time move of a data directory
of the single-job layout by a real crawl."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import sqlite3
from pathlib import Path

from tests.e2e.cli_checks import assert_one_line_error, wait_until
from tests.e2e.conftest import Served, export_rows, job_data, run_trawler, start_testsite
from tests.e2e.test_crash import assert_complete_and_once, fetch_times, start_crawl
from tests.e2e.test_distributed import submit

COMMON = ("--allow-private", "-q", "--no-sitemaps", "--delay", "0", "--scope", "any")


def jobs(*args: str) -> dict:
    out = run_trawler("jobs", *args, "--json")
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def _to_single_job_layout(data: Path) -> str:
    """Put a job's files back where Trawler kept them before jobs (DATA/trawler.db...)."""
    directory = job_data(data)
    for child in directory.iterdir():
        os.replace(child, data / child.name)
    directory.rmdir()
    (data / "jobs").rmdir()
    for name in ("jobs.db", "jobs.db-wal", "jobs.db-shm"):
        (data / name).unlink(missing_ok=True)
    with sqlite3.connect(data / "trawler.db") as conn:  # as an older Trawler left it
        conn.execute("UPDATE jobs SET state = 'stopped'")
    return directory.name


def _digests(directory: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in directory.iterdir()}


def test_a_single_job_data_directory_is_moved_once_and_resumed(tmp_path: Path) -> None:
    served = start_testsite(tmp_path, hosts=2, pages=20)
    data = tmp_path / "data"
    try:
        first = run_trawler("crawl", *served.seeds, "--data", str(data), *COMMON,
                            "--max-pages", "8")  # fmt: skip
        assert first.returncode == 0, first.stderr
        job_id = _to_single_job_layout(data)
        before, warc = export_rows(data), _digests(data / "warc")  # read where it is
        assert 0 < len(before) < len(served.site.reachable(served.seeds, None, "any"))
        # The stored --max-pages 8 is spent: a larger budget given again resumes it.
        resumed = run_trawler("crawl", "--data", str(data), "-q", "--max-pages", "1000")
        assert resumed.returncode == 0, resumed.stderr
    finally:
        served.process.terminate()
    assert not (data / "trawler.db").exists() and job_data(data).name == job_id
    assert _digests(job_data(data) / "warc").items() >= warc.items()  # the old files, as they were
    after = assert_complete_and_once(served, data)
    assert [r for r in after if r["url"] in {b["url"] for b in before}] == before
    assert max(len(t) for t in fetch_times(served).values()) == 1  # nothing fetched twice
    listed = jobs("list", "--data", str(data))
    assert listed["total"] == 1 and listed["jobs"][0]["state"] == "finished"
    shown = jobs("show", job_id, "--data", str(data))
    assert [e["reason"] for e in shown["events"]] == [
        "moved from the single-job layout (was stopped)",
        "resumed",
        "complete",
    ]


def test_ctrl_c_leaves_the_job_paused_and_a_crawl_resumes_it(tmp_path: Path) -> None:
    served = start_testsite(tmp_path, hosts=2, pages=30)
    data = tmp_path / "data"
    try:
        crawl = start_crawl(served, data, "--delay", "0.1")
        wait_until(lambda: len(served.log()) >= 6, 30, "the crawl to fetch pages")
        crawl.send_signal(signal.SIGINT)
        assert crawl.wait(20) == 128 + signal.SIGINT
        (job,) = jobs("list", "--data", str(data))["jobs"]
        assert job["state"] == "paused"
        events = jobs("show", job["id"], "--data", str(data))["events"]
        assert events[-1]["reason"] == f"signal {signal.SIGINT}"
        stats = run_trawler("stats", "--data", str(data), "--json")
        assert json.loads(stats.stdout)["job"]["state"] == "paused"  # as the job store says
        hint = run_trawler("jobs", "resume", job["id"], "--data", str(data))
        assert hint.returncode == 0 and "no crawl runs in" in hint.stderr, hint.stderr
        resumed = run_trawler("crawl", "--data", str(data), "-q")
        assert resumed.returncode == 0, resumed.stderr
    finally:
        served.process.terminate()
    assert_complete_and_once(served, data)
    assert jobs("show", job["id"], "--data", str(data))["state"] == "finished"


def test_jobs_commands_on_a_data_directory(testsite: Served, tmp_path: Path) -> None:
    data = tmp_path / "data"
    for seed in testsite.seeds[:2]:
        out = run_trawler("crawl", seed, "--data", str(data), "--max-depth", "0", *COMMON)
        assert out.returncode == 0, out.stderr
    listed = jobs("list", "--data", str(data))
    assert listed["total"] == 2 and [j["state"] for j in listed["jobs"]] == ["finished"] * 2
    newest, oldest = (j["id"] for j in listed["jobs"])
    assert jobs("list", "--data", str(data), "--offset", "1")["jobs"][0]["id"] == oldest
    assert jobs("list", "--data", str(data), "--state", "paused")["total"] == 0
    shown = jobs("show", oldest, "--data", str(data))
    assert shown["pages_crawled"] == 1 and shown["options"]["max_depth"] == 0
    line = assert_one_line_error(run_trawler("jobs", "pause", oldest, "--data", str(data)), 1)
    assert f"job {oldest} is finished: it cannot become paused" in line
    line = assert_one_line_error(run_trawler("jobs", "show", "nosuch", "--data", str(data)), 2)
    assert "no job 'nosuch'" in line
    missing = run_trawler("jobs", "list", "--data", str(tmp_path / "none"))
    assert "no crawl data" in assert_one_line_error(missing, 2)
    assert_one_line_error(run_trawler("jobs", "list", "--data", str(data), "--state", "x"), 2)
    unknown = run_trawler("crawl", "--data", str(data), "--job", "nosuch")
    assert "no job 'nosuch'" in assert_one_line_error(unknown, 2)
    exported = run_trawler("export", "--data", str(data), "--job", oldest)
    assert [json.loads(x)["url"] for x in exported.stdout.splitlines()] == testsite.seeds[:1]
    stats = run_trawler("stats", "--data", str(data), "--job", newest, "--json")
    assert json.loads(stats.stdout)["job"]["id"] == newest
    search = run_trawler("search", "page", "--data", str(data), "--job", "nosuch")
    assert "no job 'nosuch'" in assert_one_line_error(search, 2)


def test_jobs_commands_on_postgres(
    testsite: Served, tmp_path: Path, redis_url: str, fresh_postgres_url: str
) -> None:
    job = submit(testsite, redis_url, fresh_postgres_url)
    pg = ("--postgres", fresh_postgres_url)
    listed = jobs("list", *pg)
    assert listed["total"] == 1 and listed["jobs"][0]["state"] == "running"
    queued = jobs("show", job, *pg, "--redis", redis_url)["urls_queued"]
    assert queued == len(testsite.seeds)  # no worker yet
    for command, state in (("pause", "paused"), ("resume", "running"), ("cancel", "cancelled")):
        out = run_trawler("jobs", command, job, *pg)
        assert out.returncode == 0 and f"job {job} is {state}" in out.stdout, out.stderr
    shown = jobs("show", job, *pg)
    assert [(e["from_state"], e["to_state"]) for e in shown["events"]] == [
        (None, "running"), ("running", "paused"), ("paused", "running"),
        ("running", "cancelled")]  # fmt: skip
    assert shown["finished_at"] >= shown["started_at"]
    line = assert_one_line_error(run_trawler("jobs", "resume", job, *pg), 1)
    assert "is cancelled: it cannot become running" in line
    assert_one_line_error(run_trawler("jobs", "show", "nosuch", *pg), 2)
