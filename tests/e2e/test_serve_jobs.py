"""`trawler serve --data DIR` running jobs: a real server process on loopback, jobs
created through the API against a real site, judged from the site's access log."""

from __future__ import annotations

import json
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx2
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.e2e.api_server import ServeProcess, serving, start_serve
from tests.e2e.cli_checks import assert_one_line_error
from tests.e2e.conftest import run_trawler
from tests.e2e.runner_site import (
    CLOCK_SLACK_S,
    LatencyServer,
    fetched_urls,
    min_gaps,
    overlaps,
    serve,
    stored_urls,
)
from tests.e2e.test_runner_controls import gaps_after
from trawler.jobs.layout import job_dir
from trawler.store.sqlite import DB_NAME

pytestmark = pytest.mark.timeout(180)
TOKEN = "serve-jobs-token"


@pytest.fixture
def server(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[LatencyServer]:
    yield from serve(tmp_path, request)


@pytest.fixture
def data(tmp_path: Path) -> Path:
    return tmp_path / "data"


@pytest.fixture
def api(data: Path, tmp_path: Path) -> Iterator[ServeProcess]:
    yield from serving(data, tmp_path, TOKEN)


def body(name: str, seeds: list[str], delay_s: float, **options: object) -> dict:
    return {"seeds": seeds, "allow_private": True, "delay": delay_s, "user_agent": f"{name}/1.0",
            "parse_processes": 0, "sitemaps": False, **options}  # fmt: skip


def create(client: httpx2.Client, job: dict) -> str:
    answer = client.post("/api/v1/jobs", json=job)
    assert answer.status_code == 201, answer.text
    return str(answer.json()["id"])


def job_state(client: httpx2.Client, job_id: str) -> str:
    return str(client.get(f"/api/v1/jobs/{job_id}").json()["state"])


def until(predicate: Callable[[], bool], timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def finished(client: httpx2.Client, job_id: str, timeout_s: float = 90) -> None:
    until(lambda: job_state(client, job_id) == "finished", timeout_s, f"job {job_id} to finish")


def assert_complete_once(server: LatencyServer, data: Path, job_id: str, name: str,
                         hosts: list[int]) -> None:  # fmt: skip
    fetched = fetched_urls(server.log(f"{name}/1.0"))
    expected = server.site.reachable([server.seeds[i] for i in hosts], None, "host")
    assert set(fetched) == set(expected) == stored_urls(job_dir(data, job_id))
    assert max(fetched.values()) == 1, [u for u, n in fetched.items() if n > 1]


def test_three_jobs_created_at_once_share_politeness_per_host(
    server: LatencyServer, data: Path, api: ServeProcess
) -> None:
    """A (hosts 0, 1), B (1, 2), C (0, 1, 2) at --delay 0.3: never two requests in flight
    to one host, 0.3 s between any two of them whichever job sent them. The check can
    fail: test_runner.py's run with a Services per job breaks it."""
    plan = {"A": [0, 1], "B": [1, 2], "C": [0, 1, 2]}
    with api.client() as client:
        ids = {name: create(client, body(name, [server.seeds[i] for i in hosts], 0.3))
               for name, hosts in plan.items()}  # fmt: skip
        for job_id in ids.values():
            finished(client, job_id)
        metrics = client.get("/metrics").text
        bad = client.post("/api/v1/jobs", json={"seeds": ["http://127.0.0.1/"], "delay": -1})
    log = server.log()
    assert not overlaps(log), overlaps(log)[:3]
    gaps = min_gaps(log)
    assert len(gaps) == 3 and min(gaps.values()) >= 0.3 - CLOCK_SLACK_S, gaps
    for name, hosts in plan.items():
        assert_complete_once(server, data, ids[name], name, hosts)
    families = {f.name: f for f in text_string_to_metric_families(metrics)}
    labelled = {s.labels.get("job") for s in families["trawler_pages_fetched"].samples}
    assert set(ids.values()) <= labelled
    assert bad.status_code == 422 and bad.json()["detail"][0]["loc"] == ["body", "delay"]


@pytest.mark.parametrize("server", [(4, 24, 0.05)], indirect=True)
def test_pause_resume_and_cancel(server: LatencyServer, data: Path, api: ServeProcess) -> None:
    """Pause: no request of A after 2 s (none of the check holds if pause does not
    reach the runner: A runs on to its end meanwhile). Cancel: B's stored pages kept."""
    with api.client() as client:
        a = create(client, body("A", server.seeds[:2], 0.15))
        b = create(client, body("B", server.seeds[2:4], 0.3))
        until(lambda: len(server.log("A/1.0")) >= 6 and len(server.log("B/1.0")) >= 3, 30, "pages")
        assert client.post(f"/api/v1/jobs/{a}/pause").json()["state"] == "paused"
        paused_at = time.time()
        time.sleep(3.0)
        late = [e for e in server.log("A/1.0") if e["t"] > paused_at + 2.0]
        assert not late, late
        a_all = server.site.reachable(server.seeds[:2], None, "host")
        assert len(fetched_urls(server.log("A/1.0"))) < len(a_all)  # it had more to fetch
        assert client.post(f"/api/v1/jobs/{a}/pause").status_code == 409
        # Paused, it is still this server's: a crawl may not run it (its lock).
        refused = run_trawler("crawl", "--data", str(data), "--job", a, "--allow-private")
        line = assert_one_line_error(refused, 1)
        assert f"job {a} is being run by another trawler process (pid {api.process.pid})" in line
        assert client.post(f"/api/v1/jobs/{a}/resume").json()["state"] == "running"
        cancelled = client.post(f"/api/v1/jobs/{b}/cancel")
        cancelled_at = time.time()
        assert cancelled.status_code == 200 and cancelled.json()["state"] == "cancelled"
        finished(client, a)
        rows = client.get(f"/api/v1/jobs/{b}/export").text.splitlines()
        b_info = client.get(f"/api/v1/jobs/{b}").json()
    assert_complete_once(server, data, a, "A", [0, 1])
    assert rows and len(rows) == b_info["pages_crawled"] == len(stored_urls(job_dir(data, b)))
    assert {json.loads(row)["url"] for row in rows} == stored_urls(job_dir(data, b))
    assert not [e for e in server.log("B/1.0") if e["t"] > cancelled_at + 0.5]
    b_all = server.site.reachable(server.seeds[2:4], None, "host")
    assert len(fetched_urls(server.log("B/1.0"))) < len(b_all)  # cancelled before its end


@pytest.mark.parametrize("server", [(2, 16, 0.02)], indirect=True)
def test_blocklist_and_politeness_through_the_api(
    server: LatencyServer, data: Path, api: ServeProcess, tmp_path: Path
) -> None:
    """Host 1 reached by links (scope any), then blocked: no further request, its queued
    URLs skipped as `blocklist`. A larger delay set live widens host 0's intervals."""
    blocked_host = server.site.netloc(1)
    with api.client() as client:
        job = create(client, body("A", server.seeds[:1], 0.1, scope="any"))
        until(lambda: sum(e["host"] == blocked_host for e in server.log()) >= 3, 30, "host 1")
        block = {"domain": server.site.address(1), "reason": "complaint"}
        answer = client.post("/api/v1/admin/blocklist", json=block)
        blocked_at = time.time()
        assert answer.status_code == 201, answer.text
        time.sleep(1.0)  # the block alone: it takes effect at once, not at the next poll
        put = client.put("/api/v1/admin/settings/politeness", json={"delay": 0.5})
        slowed_at = time.time()
        assert put.status_code == 200 and put.json()["delay"] == 0.5
        finished(client, job)
    late = [e for e in server.log() if e["host"] == blocked_host and e["t"] > blocked_at + 0.05]
    assert not late, late
    conn = sqlite3.connect(job_dir(data, job) / DB_NAME)
    skipped = conn.execute("SELECT count(*) FROM urls WHERE host = ? AND reason = 'blocklist'",
                           (blocked_host,)).fetchone()[0]  # fmt: skip
    conn.close()
    assert skipped > 0
    slowed = gaps_after(server.log(), slowed_at + 0.05)
    assert len(slowed) >= 4 and min(slowed) >= 0.5 - CLOCK_SLACK_S, slowed
    assert min(min_gaps(server.log()).values()) < 0.4  # before the change: faster
    api.stop()  # the controls are kept in the data directory: a new server has them
    again = start_serve(data, tmp_path / "serve2.log", token=TOKEN)
    try:
        with again.client() as client:
            listed = client.get("/api/v1/admin/blocklist").json()
            politeness = client.get("/api/v1/admin/settings/politeness").json()
    finally:
        again.stop()
    assert [(e["domain"], e["reason"]) for e in listed] == [(server.site.address(1), "complaint")]
    assert politeness["delay"] == 0.5


@pytest.mark.parametrize("server", [(2, 12, 0.05)], indirect=True)
def test_sigterm_pauses_and_the_next_serve_resumes(
    server: LatencyServer, data: Path, api: ServeProcess, tmp_path: Path
) -> None:
    with api.client() as client:
        job = create(client, body("A", server.seeds[:2], 0.1))
        until(lambda: len(server.log("A/1.0")) >= 6, 30, "six requests")
    api.process.send_signal(signal.SIGTERM)
    assert api.process.wait(30) == -signal.SIGTERM  # uvicorn ends by the signal, once clean
    assert "Application shutdown complete" in api.log()
    shown = json.loads(run_trawler("jobs", "show", job, "--data", str(data), "--json").stdout)
    assert shown["state"] == "paused" and shown["events"][-1]["reason"] == "shutdown"
    stopped_with = len(server.log("A/1.0"))
    again = start_serve(data, tmp_path / "serve2.log", "--allow-private", token=TOKEN)
    try:
        with again.client() as client:
            finished(client, job)
    finally:
        again.stop()
    assert stopped_with < len(server.log("A/1.0"))  # the second server did the rest
    assert_complete_once(server, data, job, "A", [0, 1])


def crawl_process(seeds: list[str], data: Path, *args: str) -> subprocess.Popen[str]:
    cmd = [sys.executable, "-m", "trawler", "crawl", *seeds, "--data", str(data), "--allow-private",
           "--scope", "any", "-q", "--no-sitemaps", "--parse-processes", "0", *args]  # fmt: skip
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


@pytest.mark.parametrize("server", [(2, 30, 0.02)], indirect=True)
def test_serve_beside_a_crawl_of_the_same_data_directory(
    server: LatencyServer, data: Path, tmp_path: Path
) -> None:
    """The crawl's job is not run by the server; the server's job is not run by a
    crawl (--job ID is refused); a domain blocked through the API is not fetched
    by the crawl; pause through the API reaches the crawl through the job store."""
    crawl = crawl_process(server.seeds[:1], data, "--delay", "0.25", "--user-agent", "C/1.0")
    api: ServeProcess | None = None
    try:
        until(lambda: len(server.log("C/1.0")) >= 3, 30, "the crawl's first requests")
        api = start_serve(data, tmp_path / "serve.log", "--allow-private", token=TOKEN)
        with api.client() as client:
            crawl_job = client.get("/api/v1/jobs").json()["jobs"][0]["id"]
            mine = create(client, body("S", server.seeds[1:2], 1.0))
            refused = run_trawler("crawl", "--data", str(data), "--job", mine)
            until(lambda: sum(e["host"] == server.site.netloc(1) for e in server.log("C/1.0")) >= 2,
                  30, "the crawl on host 1")  # fmt: skip
            answer = client.post("/api/v1/admin/blocklist", json={"domain": server.site.address(1)})
            assert answer.status_code == 201
            blocked_at = time.time()
            assert client.post(f"/api/v1/jobs/{crawl_job}/pause").json()["state"] == "paused"
            paused_at = time.time()
            time.sleep(2.5)
            workers = client.get("/api/v1/admin/workers").json()
            assert client.post(f"/api/v1/jobs/{crawl_job}/resume").json()["state"] == "running"
            finished(client, mine)  # its host blocked: its queue skipped
        assert crawl.wait(90) == 0, crawl.stderr.read() if crawl.stderr else ""
    finally:
        if crawl.poll() is None:
            crawl.kill()
        if api is not None:
            api.stop()
    # One crawl per directory (its politeness is per process): refused by that lock.
    line = assert_one_line_error(refused, 1)
    assert f"in use by another trawler process (pid {crawl.pid})" in line
    crawl_log = server.log("C/1.0")
    assert not [e for e in crawl_log if e["t"] > paused_at + 2.0 and e["t"] < paused_at + 2.5]
    late = [
        e for e in crawl_log if e["host"] == server.site.netloc(1) and e["t"] > blocked_at + 1.0
    ]
    assert not late, late  # the crawl follows the stored blocklist within 0.5 s
    assert not [e for e in server.log("S/1.0") if e["t"] > blocked_at + 0.05]  # nor the server's
    assert len(workers) == 1 and workers[0]["state"] in ("live", "idle")
    assert fetched_urls(crawl_log) and max(fetched_urls(crawl_log).values()) == 1
