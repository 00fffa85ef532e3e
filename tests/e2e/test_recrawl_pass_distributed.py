"""A revisit pass of a distributed job (issue 15): `POST /api/v1/jobs/{id}/recrawl` on
`trawler serve --redis --postgres` and `trawler recrawl --postgres --redis`, carried out
by two real `trawler worker`s against the changing site on loopback. The site's access
log says what was asked and answered; PostgreSQL what was recorded; the API and the
CLI read the versions back."""

from __future__ import annotations

import json
import subprocess
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx2
import psycopg
import pytest

from tests.e2e.api_server import ServeProcess
from tests.e2e.conftest import run_trawler, until
from tests.e2e.serve_dist import start_dist_serve, start_workers, stop_all
from tests.e2e.test_recrawl import Site, start_site
from tests.servers import PostgresServer

pytestmark = pytest.mark.timeout(240)
PAGES = 10  # the changing site's: /, 3 fast, 3 never, /plain, and --pages 2
# Each page is due again 0.5 s after its visit, while the pass (10 pages 0.2 s apart)
# still runs: fed again, it would be asked twice (the pass feeds only pages due when
# it began).
WINDOW = {"revisit_min_s": 0.5, "revisit_max_s": 0.5}


@dataclass
class Deployment:
    site: Site
    serve: ServeProcess
    client: httpx2.Client
    redis_url: str
    postgres_url: str
    workers: list[subprocess.Popen]

    @property
    def connect(self) -> list[str]:
        return ["--postgres", self.postgres_url, "--redis", self.redis_url]

    def rows(self, sql: str, job: str) -> list[tuple]:
        with psycopg.connect(self.postgres_url) as conn:
            return conn.execute(sql, {"job": job}).fetchall()

    def state(self, job: str) -> str:
        return str(self.client.get(f"/api/v1/jobs/{job}").json()["state"])

    def wait_state(self, job: str, state: str, timeout_s: float = 90) -> None:
        assert until(lambda: self.state(job) == state, timeout_s), (job, self.state(job))

    def create(self, delay_s: float) -> str:
        body = {"seeds": [self.site.seed], "allow_private": True, "sitemaps": False,
                "max_attempts": 1, "delay": delay_s}  # fmt: skip
        answer = self.client.post("/api/v1/jobs", json=body)
        assert answer.status_code == 201, answer.text
        return str(answer.json()["id"])


def _deployment(tmp: Path, request: pytest.FixtureRequest, workers: int) -> Iterator[Deployment]:
    redis_url = request.getfixturevalue("redis_url")
    postgres: PostgresServer = request.getfixturevalue("postgres_server")
    database = postgres.create_database(f"t_{uuid.uuid4().hex[:12]}")
    site = start_site(tmp, "--pages", "2")
    serve = start_dist_serve(tmp, redis_url, database)
    started = start_workers(tmp, redis_url, database, workers)
    client = serve.client()
    try:
        yield Deployment(site, serve, client, redis_url, database, started)
    finally:
        client.close()
        stop_all(started, serve, site)  # type: ignore[arg-type]
    assert "Traceback" not in serve.log(), serve.log()[-3000:]


@pytest.fixture
def deployment(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Deployment]:
    yield from _deployment(tmp_path, request, workers=2)


@pytest.fixture
def idle(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Deployment]:
    """No worker: jobs stay as the test leaves them."""
    yield from _deployment(tmp_path, request, workers=0)


def _asked(site: Site, mark: int) -> dict[str, list[dict]]:
    """The requests since ``mark`` by path (robots.txt left out)."""
    found: dict[str, list[dict]] = {}
    for record in site.log()[mark:]:
        if record["path"] != "/robots.txt":
            found.setdefault(record["path"], []).append(record)
    return found


def _reasons(d: Deployment, job: str) -> list[str]:
    rows = d.rows("SELECT reason FROM job_events WHERE job_id = %(job)s ORDER BY id", job)
    return [reason for (reason,) in rows]


def test_a_pass_through_the_api_then_the_cli_revisits_every_page_once(
    deployment: Deployment,
) -> None:
    d, fast = deployment, f"{deployment.site.seed}fast-0"
    job = d.create(0.2)
    d.wait_state(job, "finished")
    before = d.client.get(f"/api/v1/jobs/{job}/versions", params={"url": fast})
    assert before.status_code == 404 and "not revisited yet" in before.json()["detail"]
    time.sleep(1.1)  # the fast pages have a new edition now
    mark = len(d.site.log())
    answer = d.client.post(f"/api/v1/jobs/{job}/recrawl", json=WINDOW)
    assert answer.status_code == 202, answer.text
    assert answer.json()["state"] == "running" and answer.json()["finished_at"] is None
    again = d.client.post(f"/api/v1/jobs/{job}/recrawl")
    paused = d.client.post(f"/api/v1/jobs/{job}/pause")
    assert again.status_code == 409 and "is running" in again.json()["detail"], again.text
    assert paused.status_code == 409 and "cancel it" in paused.json()["detail"], paused.text
    d.wait_state(job, "finished")
    assert d.client.get(f"/api/v1/jobs/{job}").json()["finished_at"] is not None
    assert _reasons(d, job)[-2:] == ["recrawl", "recrawl done"]
    asked = _asked(d.site, mark)
    assert len(asked) == PAGES and all(len(r) == 1 for r in asked.values()), asked
    # The crawl's own validators (the job was never continuous) are sent on its first pass.
    assert all(asked[f"/never-{i}"][0]["status"] == 304 for i in range(3)), asked
    visits = dict(d.rows("SELECT url, verdict FROM visits WHERE job_id = %(job)s", job))
    assert len(visits) == PAGES
    assert visits[fast] == "changed" and visits[f"{d.site.seed}never-0"] == "not_modified"
    longest = d.rows("SELECT max(next_visit_at - last_visit_at) FROM revisit_state"
                     " WHERE job_id = %(job)s", job)[0][0]  # fmt: skip
    assert longest == pytest.approx(0.5)  # the body's window, not the job's (30 days)
    _check_versions(d, job, fast)

    # Again from the command line: the validators the first pass learnt are sent now.
    mark = len(d.site.log())
    out = run_trawler("recrawl", *d.connect, "--job", job, "--revisit-min", "0.5",
                      "--revisit-max", "20")  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert f"job {job}: a recrawl pass of {PAGES} pages" in out.stderr
    assert until(lambda: _reasons(d, job).count("recrawl done") == 2, 90), _reasons(d, job)
    asked = _asked(d.site, mark)
    assert len(asked) == PAGES and all(len(r) == 1 for r in asked.values()), asked
    assert all(asked[f"/never-{i}"][0]["status"] == 304 for i in range(3)), asked
    assert d.state(job) == "finished"


def _check_versions(d: Deployment, job: str, fast: str) -> None:
    """The API's versions and export read PostgreSQL as `trawler versions/export` do."""
    listed = d.client.get(f"/api/v1/jobs/{job}/versions", params={"url": fast, "text": True})
    assert listed.status_code == 200, listed.text
    versions = listed.json()["versions"]
    assert [v["version"] for v in versions] == [1, 2] and versions[1]["distance"] is not None
    assert "edition" in versions[1]["text"] and versions[0]["gone"] is False
    cli = run_trawler("versions", fast, "--postgres", d.postgres_url, "--job", job, "--text")
    assert [json.loads(line) for line in cli.stdout.splitlines()] == [
        {k: v for k, v in row.items()} for row in versions
    ]
    every = _jsonl(d.client.get(f"/api/v1/jobs/{job}/export", params={"versions": "all"}))
    cli = run_trawler("export", "--postgres", d.postgres_url, "--job", job, "--versions", "all")
    assert every == [json.loads(line) for line in cli.stdout.splitlines()]
    assert [row["version"] for row in every if row["url"] == fast] == [1, 2]
    latest = _jsonl(d.client.get(f"/api/v1/jobs/{job}/export"))
    assert {row["url"]: row["version"] for row in latest}[fast] == 2
    csv = d.client.get(f"/api/v1/jobs/{job}/export", params={"format": "csv"}).text
    assert csv.splitlines()[0].endswith(",version")


def _jsonl(answer: httpx2.Response) -> list[dict]:
    assert answer.status_code == 200, answer.text
    return [json.loads(line) for line in answer.text.splitlines()]


def test_refusals(idle: Deployment) -> None:
    """No worker runs: a created job stays running, a cancelled one stored nothing."""
    d = idle
    running = d.create(1.0)
    empty = d.create(1.0)
    assert d.client.post(f"/api/v1/jobs/{empty}/cancel").status_code == 200
    busy = d.client.post(f"/api/v1/jobs/{running}/recrawl")
    assert busy.status_code == 409, busy.text
    assert busy.json()["detail"] == (
        f"job {running} is running: a recrawl pass needs a finished or cancelled job"
        " (the crawl is over)"
    )
    nothing = d.client.post(f"/api/v1/jobs/{empty}/recrawl")
    assert nothing.status_code == 409 and "stored no page" in nothing.json()["detail"]
    assert d.client.post("/api/v1/jobs/nope/recrawl").status_code == 404
    bad = d.client.post(f"/api/v1/jobs/{empty}/recrawl", json={"revisit_min_s": 10,
                                                              "revisit_max_s": 5})  # fmt: skip
    assert bad.status_code == 422 and bad.json()["error"].startswith("invalid revisit_max_s:")
    assert d.state(empty) == "cancelled" and _reasons(d, empty)[-1] != "recrawl"

    out = run_trawler("recrawl", *d.connect, "--job", running)
    assert out.returncode == 1 and "is running" in _one_line(out.stderr)
    out = run_trawler("recrawl", *d.connect, "--job", "nope")
    assert out.returncode == 2 and "no job 'nope'" in _one_line(out.stderr)
    pg, redis = ["--postgres", d.postgres_url], ["--redis", d.redis_url]
    for options, says in [
        (pg, "--postgres needs --redis"),
        (redis, "--redis needs --postgres"),
        ([*pg, *redis, "--continuous"], "--continuous"),
        ([*pg, *redis, "--delay", "1"], "--delay"),
        ([*pg, *redis, "--revisit-policy", "optimal"], "--revisit-policy"),
        ([*pg, *redis, "--revisit-min", "10", "--revisit-max", "5"], "revisit"),
    ]:
        out = run_trawler("recrawl", *options, "--job", empty)
        assert out.returncode == 2 and says in _one_line(out.stderr), (options, out.stderr)
    assert d.state(empty) == "cancelled"


def _one_line(stderr: str) -> str:
    lines = stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("trawler: error: "), stderr
    return lines[0]
