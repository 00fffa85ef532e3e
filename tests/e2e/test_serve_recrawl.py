"""`POST /api/v1/jobs/{id}/recrawl` on `trawler serve --data DIR` (issue 15): a real
server process, jobs crawled through the API against the changing site on loopback,
judged from the site's access log and the job's database."""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path

import httpx2
import pytest

from tests.e2e.api_server import ServeProcess, serving, start_serve
from tests.e2e.conftest import run_trawler
from tests.e2e.test_recrawl import CLOCK_SLACK_S, Site, start_site
from tests.e2e.test_serve_jobs import body, create, finished, job_state, until
from trawler.jobs.layout import job_dir
from trawler.store.sqlite import DB_NAME

pytestmark = pytest.mark.timeout(180)
TOKEN = "serve-recrawl-token"
PAGES = 10  # the changing site's: /, 3 fast, 3 never, /plain, and --pages 2


@pytest.fixture
def site(tmp_path: Path) -> Iterator[Site]:
    site = start_site(tmp_path, "--pages", "2")
    yield site
    site.process.terminate()
    site.process.wait(10)


@pytest.fixture
def data(tmp_path: Path) -> Path:
    return tmp_path / "data"


@pytest.fixture
def api(data: Path, tmp_path: Path) -> Iterator[ServeProcess]:
    yield from serving(data, tmp_path, TOKEN)


def crawled_job(client: httpx2.Client, site: Site, name: str, delay_s: float) -> str:
    job_id = create(client, body(name, [site.seed], delay_s))
    finished(client, job_id)
    return job_id


def recrawl(client: httpx2.Client, job_id: str, **window: float) -> httpx2.Response:
    return client.post(f"/api/v1/jobs/{job_id}/recrawl", json=window or None)


def job_db(data: Path, job_id: str) -> sqlite3.Connection:
    return sqlite3.connect(job_dir(data, job_id) / DB_NAME)


def test_a_recrawl_pass_revisits_every_page_and_the_job_finishes_again(
    site: Site, data: Path, api: ServeProcess
) -> None:
    with api.client() as client:
        job = crawled_job(client, site, "A", 0.2)
        time.sleep(1.1)  # the fast pages have a new edition now
        mark = len(site.log())
        answer = recrawl(client, job, revisit_min_s=0.5, revisit_max_s=20)
        assert answer.status_code == 202, answer.text
        assert answer.json()["state"] == "running" and answer.json()["finished_at"] is None
        again = recrawl(client, job)
        paused = client.post(f"/api/v1/jobs/{job}/pause")
        finished(client, job)
        events = client.get(f"/api/v1/jobs/{job}").json()
    assert again.status_code == 409 and "is running" in again.json()["detail"]
    assert paused.status_code == 409 and "cancel it" in paused.json()["detail"]
    revisits = site.log()[mark:]
    assert [r["path"] for r in revisits].count("/robots.txt") == 1  # read again first
    by_path = {r["path"]: r for r in revisits if r["path"] != "/robots.txt"}
    assert len(by_path) == PAGES == len(revisits) - 1  # every page once
    assert all(by_path[f"/never-{i}"]["status"] == 304 for i in range(3)), by_path
    assert all(by_path[f"/fast-{i}"]["status"] == 200 for i in range(3)), by_path
    with job_db(data, job) as conn:
        versions = dict(conn.execute("SELECT url, max(version) FROM page_versions GROUP BY url"))
        longest = conn.execute("SELECT max(next_visit_at - last_visit_at) FROM revisit_state")
        longest_s = longest.fetchone()[0]
    assert versions[f"{site.seed}fast-0"] == 2 and versions[f"{site.seed}never-0"] == 1
    assert longest_s <= 20  # the body's window, not the job's (30 days)
    assert events["finished_at"] is not None


def test_two_passes_share_politeness_per_host(site: Site, api: ServeProcess) -> None:
    """Two jobs of one site revisited at once, each at --delay 0.3: 0.3 s between any
    two requests to the host, whichever pass sent them (the same gap check is shown
    able to fail at --delay 0 in test_recrawl.py)."""
    with api.client() as client:
        jobs = [crawled_job(client, site, name, 0.3) for name in ("A", "B")]
        mark = len(site.log())
        for job in jobs:
            assert recrawl(client, job).status_code == 202
        for job in jobs:
            finished(client, job)
    revisits = site.log()[mark:]
    assert len(revisits) == 2 * (PAGES + 1)
    times = [r["t"] for r in revisits]
    gaps = [b - a for a, b in zip(times, times[1:], strict=False)]
    assert min(gaps) >= 0.3 - CLOCK_SLACK_S, revisits


def test_a_pass_stopped_by_shutdown_is_abandoned(
    site: Site, data: Path, api: ServeProcess, tmp_path: Path
) -> None:
    """SIGTERM during a pass: the job goes back to finished (not paused: the next
    server must not resume it as a crawl), and the next server sends nothing."""
    with api.client() as client:
        job = crawled_job(client, site, "A", 0.4)
        mark = len(site.log())
        assert recrawl(client, job).status_code == 202
        until(lambda: len(site.log()) >= mark + 3, 30, "three revisits")
    api.stop()
    stopped = len(site.log())
    assert stopped < mark + PAGES + 1  # stopped before the pass's end
    again = start_serve(data, tmp_path / "serve2.log", "--allow-private", token=TOKEN)
    try:
        with again.client() as client:
            time.sleep(2.0)
            info = client.get(f"/api/v1/jobs/{job}").json()
    finally:
        again.stop()
    assert info["state"] == "finished"
    assert [e["reason"] for e in events_of(data, job)][-2:] == ["recrawl", "shutdown"]
    assert len(site.log()) == stopped


def events_of(data: Path, job_id: str) -> list[dict]:
    with sqlite3.connect(data / "jobs.db") as conn:
        rows = conn.execute(
            "SELECT from_state, to_state, reason FROM job_events WHERE job_id = ? ORDER BY id",
            (job_id,),
        ).fetchall()
    return [{"from": f, "to": t, "reason": r} for f, t, r in rows]


def test_cancel_ends_a_pass(site: Site, data: Path, api: ServeProcess) -> None:
    with api.client() as client:
        job = crawled_job(client, site, "A", 0.4)
        mark = len(site.log())
        assert recrawl(client, job).status_code == 202
        until(lambda: len(site.log()) >= mark + 2, 30, "two revisits")
        cancelled = client.post(f"/api/v1/jobs/{job}/cancel")
        cancelled_at = time.time()
        time.sleep(1.0)
        assert cancelled.status_code == 200 and cancelled.json()["state"] == "cancelled"
        assert not [r for r in site.log() if r["t"] > cancelled_at + 0.5]
        # A cancelled job may be revisited too, and goes back to cancelled after.
        assert recrawl(client, job).status_code == 202
        until(lambda: job_state(client, job) == "cancelled", 60, "the second pass")
    assert [e["reason"] for e in events_of(data, job)][-2:] == ["recrawl", "recrawl done"]


def test_a_pass_paused_from_a_shell_stops_there(site: Site, data: Path, api: ServeProcess) -> None:
    """`trawler jobs pause` of a job running a pass (the store changed by another
    process): the pass stops within 2 s and the job stays paused; a resume then runs
    it as a crawl, which has nothing left and finishes."""
    with api.client() as client:
        job = crawled_job(client, site, "A", 0.4)
        mark = len(site.log())
        assert recrawl(client, job).status_code == 202
        until(lambda: len(site.log()) >= mark + 2, 30, "two revisits")
        paused = run_trawler("jobs", "pause", job, "--data", str(data))
        paused_at = time.time()
        assert paused.returncode == 0, paused.stderr
        time.sleep(2.5)
        state = job_state(client, job)
        late = [r for r in site.log() if r["t"] > paused_at + 2.0]
        assert client.post(f"/api/v1/jobs/{job}/resume").status_code == 200
        finished(client, job)
    assert state == "paused" and not late, late
    assert len(site.log()) < mark + PAGES + 1  # the pass did not run to its end


@pytest.mark.parametrize(
    ("window", "field"),
    [
        ({"revisit_min_s": 10, "revisit_max_s": 5}, "revisit_max_s"),
        ({"revisit_min_s": 0}, "revisit_min_s"),
        ({"revisit_max_s": -3}, "revisit_max_s"),
        ({"revisit_max_s": 1e300}, "revisit_max_s"),
        ({"revisit_min_s": 40 * 86400}, "revisit_min_s"),  # above the job's max (30 days)
        ({"revisit_min_s": "soon"}, "revisit_min_s"),
        ({"every": 5}, "every"),
    ],
)
def test_a_bad_window_is_422_naming_the_field(
    window: dict, field: str, site: Site, api: ServeProcess
) -> None:
    with api.client() as client:
        job = crawled_job(client, site, "A", 0.05)
        answer = client.post(f"/api/v1/jobs/{job}/recrawl", json=window)
        state = job_state(client, job)
    assert answer.status_code == 422, answer.text
    assert answer.json()["error"].startswith(f"invalid {field}:"), answer.json()
    assert state == "finished"  # nothing started


def test_refusals(site: Site, api: ServeProcess) -> None:
    with api.client() as client:
        unknown = recrawl(client, "no-such-job")
        running = create(client, body("A", [site.seed], 1.0))
        until(lambda: job_state(client, running) == "running", 30, "the crawl to run")
        busy = recrawl(client, running)
        client.post(f"/api/v1/jobs/{running}/cancel")
    assert unknown.status_code == 404
    assert busy.status_code == 409
    assert busy.json()["detail"] == (
        f"job {running} is running: a recrawl pass needs a finished or cancelled job"
        " (the crawl is over)"
    )


def test_versions_through_the_api(site: Site, data: Path, api: ServeProcess) -> None:
    """After a pass that found the fast pages changed: the export's latest or all
    versions, and one page's versions, as `trawler export/versions` give them."""
    fast = f"{site.seed}fast-0"
    with api.client() as client:
        job = crawled_job(client, site, "A", 0.05)
        before = client.get(f"/api/v1/jobs/{job}/versions", params={"url": fast})
        time.sleep(1.1)  # a new edition of the fast pages
        assert recrawl(client, job).status_code == 202
        finished(client, job)
        latest = jsonl(client.get(f"/api/v1/jobs/{job}/export"))
        every = jsonl(client.get(f"/api/v1/jobs/{job}/export", params={"versions": "all"}))
        csv = client.get(f"/api/v1/jobs/{job}/export", params={"format": "csv"}).text
        listed = client.get(f"/api/v1/jobs/{job}/versions", params={"url": fast, "text": True})
        bad = [client.get(f"/api/v1/jobs/{job}/export", params={"versions": "newest"}),
               client.get(f"/api/v1/jobs/{job}/versions", params={"url": "ftp://x/"}),
               client.get(f"/api/v1/jobs/{job}/versions")]  # fmt: skip
        missing = client.get(f"/api/v1/jobs/{job}/versions", params={"url": f"{site.seed}none"})
        unknown = client.get("/api/v1/jobs/nope/versions", params={"url": fast})
    assert before.status_code == 404 and "not revisited yet" in before.json()["detail"]
    cli = run_trawler("export", "--data", str(data), "--job", job, "--versions", "all")
    assert every == [json.loads(line) for line in cli.stdout.splitlines()]
    assert {row["url"]: row["version"] for row in latest}[fast] == 2
    assert [row["version"] for row in every if row["url"] == fast] == [1, 2]
    assert csv.splitlines()[0].endswith(",version")
    assert listed.status_code == 200, listed.text
    versions = listed.json()["versions"]
    assert [v["version"] for v in versions] == [1, 2] and versions[1]["distance"] is not None
    assert "edition" in versions[1]["text"] and versions[0]["gone"] is False
    assert [answer.status_code for answer in bad] == [422, 422, 422]
    assert [answer.json()["error"].split(":")[0] for answer in bad] == [
        "invalid versions", "invalid url", "invalid url"]  # fmt: skip
    assert missing.status_code == 404 and unknown.status_code == 404


def jsonl(answer: httpx2.Response) -> list[dict]:
    assert answer.status_code == 200, answer.text
    return [json.loads(line) for line in answer.text.splitlines()]
