"""What the dashboard reads, on both backends, from a real `trawler serve` (with
`--data`, or `--redis --postgres` and a `trawler worker`) over one finished crawl
of a three-host site: /hosts sorted (busiest, slowest, most failing) with each
host's interval, back-off and robots.txt; /jobs/{id}/errors filtered by code and
host; /jobs/{id}/pages newest first; the timeseries' bytes; the event stream's
snapshot, piece by piece the routes' answers; and a server that stops on SIGTERM
while a dashboard listens."""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.e2e.api_server import ServeProcess, start_serve
from tests.e2e.scripted import Scripted, page, start_scripted
from tests.e2e.serve_dist import job, start_dist_serve, wait_until
from tests.e2e.sse import Events
from tests.servers import PostgresServer, start_redis

pytestmark = pytest.mark.timeout(300)
TEXT = {"Content-Type": "text/plain"}
HTML = {"Content-Type": "text/html"}


def html(links: tuple[str, ...] = (), delay_s: float = 0.0) -> dict:
    body = " ".join(f'<a href="{href}">{href}</a>' for href in links)
    return {**page(f"<html><body>{body}</body></html>", **HTML), "delay_s": delay_s}


B, C = "http://127.0.9.2:{port}", "http://127.0.9.3:{port}"
# A: the busiest (5 pages, 1 error); B: the slowest (0.3 s a page), Crawl-delay
# 0.2; C: the most failing (2 errors of 3), no robots.txt (404).
SCRIPT = {
    "0": {"/robots.txt": page("User-agent: *\nDisallow: /private\n", **TEXT),
          "/": html(("/a", "/b", "/c", "/boom", "/private/x", B + "/", C + "/")),
          "/a": html(), "/b": html(), "/c": html(), "/boom": page("down", status=500)},
    "1": {"/robots.txt": page("User-agent: *\nCrawl-delay: 0.2\n", **TEXT),
          "/": html(("/x", "/y"), 0.3), "/x": html((), 0.3), "/y": html((), 0.3)},
    "2": {"/": html(("/e1", "/e2")), "/e1": page("down", status=500),
          "/e2": page("busy", status=503)},
}  # fmt: skip
OPTIONS = {"allow_private": True, "scope": "any", "sitemaps": False, "max_attempts": 1,
           "delay": 0}  # fmt: skip


@dataclass
class Served:
    serve: ServeProcess
    job_id: str
    hosts: list[str]  # A, B, C: host[:port]
    backend: str


def _crawl(serve: ServeProcess, site: Scripted) -> str:
    with serve.client() as client:
        answer = client.post("/api/v1/jobs", json={"seeds": [site.bases[0] + "/"], **OPTIONS})
        assert answer.status_code == 201, answer.text
        job_id = str(answer.json()["id"])
        wait_until(lambda: job(client, job_id)["state"] == "finished", 120, "the job to finish")
    return job_id


@pytest.fixture(scope="module", params=["embedded", "distributed"])
def served(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Served]:
    tmp = tmp_path_factory.mktemp(f"dash-{request.param}")
    site = start_scripted(tmp, SCRIPT)
    worker = None
    if request.param == "embedded":
        serve = start_serve(tmp / "data", tmp / "serve.log", "--allow-private")
    else:
        redis_url = request.getfixturevalue("module_redis_url")
        postgres: PostgresServer = request.getfixturevalue("postgres_server")
        postgres_url = postgres.create_database(f"t_dash_{time.time_ns()}")
        serve = start_dist_serve(tmp, redis_url, postgres_url)
        worker = subprocess.Popen(
            [sys.executable, "-m", "trawler", "worker", "--redis", redis_url, "--postgres",
             postgres_url, "--warc-dir", str(tmp / "warc"), "--worker-id", "dash-w0", "-q"],
            stdout=subprocess.DEVNULL, stderr=(tmp / "worker.log").open("wb"),
        )  # fmt: skip
    try:
        job_id = _crawl(serve, site)
        hosts = [base.removeprefix("http://") for base in site.bases]
        yield Served(serve, job_id, hosts, request.param)
    finally:
        if worker is not None:
            worker.terminate()
            worker.wait(30)
        serve.stop()
        site.stop()
    assert "Traceback" not in serve.log(), serve.log()[-3000:]


def get(served: Served, path: str, **params: object) -> dict:
    with served.serve.client() as client:
        answer = client.get(path, params=params)
    assert answer.status_code == 200, (path, params, answer.text)
    return dict(answer.json())


SORT_KEYS = {
    "host": lambda row: row["host"],
    "fetched": lambda row: (-row["fetched"], row["host"]),
    "queued": lambda row: (-row["queued"], row["host"]),
    "errors": lambda row: (-row["errors"], row["host"]),
    "error_rate": lambda row: (-row["error_rate"], row["host"]),
    "mean_response_s": lambda row: (row["mean_response_s"] is None,
                                    -(row["mean_response_s"] or 0), row["host"]),
}  # fmt: skip


def test_hosts_sort_busiest_slowest_most_failing(served: Served) -> None:
    a, b, c = served.hosts
    first = {}
    for sort, key in SORT_KEYS.items():
        rows = get(served, "/api/v1/hosts", job=served.job_id, sort=sort)["hosts"]
        assert rows == sorted(rows, key=key), (sort, rows)
        assert len(rows) == 3
        first[sort] = [row["host"] for row in rows]
        paged = get(served, "/api/v1/hosts", job=served.job_id, sort=sort, offset=1, limit=1)
        assert [row["host"] for row in paged["hosts"]] == first[sort][1:2] and paged["total"] == 3
    assert first["host"] == [a, b, c] and first["fetched"] == [a, b, c]
    assert first["errors"] == [c, a, b] and first["error_rate"] == [c, a, b]
    assert first["mean_response_s"][0] == b
    with served.serve.client() as client:
        bad = client.get("/api/v1/hosts", params={"sort": "size"})
    assert bad.status_code == 422 and "sort" in bad.json()["error"], bad.text


def test_hosts_show_interval_back_off_and_robots(served: Served) -> None:
    a, b, c = served.hosts
    rows = {row["host"]: row for row in get(served, "/api/v1/hosts", job=served.job_id)["hosts"]}
    assert rows[b]["interval_s"] == pytest.approx(0.2) and rows[b]["backoff_s"] is None
    assert rows[a]["interval_s"] >= 0.0 and rows[c]["interval_s"] >= 0.0
    assert rows[a]["robots"] == {"status": 200, "error": None, "crawl_delay": None}
    assert rows[b]["robots"] == {"status": 200, "error": None, "crawl_delay": 0.2}
    assert rows[c]["robots"]["status"] == 404 and rows[c]["robots"]["crawl_delay"] is None
    for host in (a, b, c):  # the host page says the same
        report = get(served, f"/api/v1/hosts/{host}", job=served.job_id)
        assert report["interval_s"] == pytest.approx(rows[host]["interval_s"]), host
    # The host page has the file itself where the store keeps it (not in PostgreSQL).
    (robots,) = get(served, f"/api/v1/hosts/{b}", job=served.job_id)["robots"]
    kept = served.backend == "embedded"
    assert robots["text"] == ("User-agent: *\nCrawl-delay: 0.2\n" if kept else None)


def test_errors_filter_by_code_and_host(served: Served) -> None:
    a, _, c = served.hosts
    path = f"/api/v1/jobs/{served.job_id}/errors"
    every = get(served, path)
    assert every["total"] == 3 and len(every["errors"]) == 3
    (boom,) = [row for row in every["errors"] if row["host"] == a]
    by_code = get(served, path, code=boom["error"])
    assert by_code["errors"] and all(row["error"] == boom["error"] for row in by_code["errors"])
    assert len(by_code["errors"]) == every["by_code"][boom["error"]]
    of_c = get(served, path, host=c)
    assert [row["url"] for row in of_c["errors"]] == [
        row["url"] for row in every["errors"] if row["host"] == c
    ]
    assert len(of_c["errors"]) == 2
    both = get(served, path, host=a, code=boom["error"])
    assert [row["url"] for row in both["errors"]] == [boom["url"]]
    for answer in (by_code, of_c, both):  # the counts stay over the whole job
        assert answer["by_code"] == every["by_code"] and answer["total"] == every["total"]
    assert get(served, path, host="nowhere.invalid")["errors"] == []


def test_pages_newest_first(served: Served) -> None:
    a = served.hosts[0]
    path = f"/api/v1/jobs/{served.job_id}/pages"
    oldest = [row["url"] for row in get(served, path, host=a)["pages"]]
    newest = get(served, path, host=a, order="desc", limit=2)
    assert len(oldest) == 5 and newest["total"] == 5
    assert [row["url"] for row in newest["pages"]] == oldest[::-1][:2]
    assert [row["url"] for row in get(served, path, host=a, order="asc")["pages"]] == oldest
    with served.serve.client() as client:
        bad = client.get(path, params={"order": "sideways"})
    assert bad.status_code == 422 and "order" in bad.json()["error"]


def test_timeseries_counts_the_bytes_fetched(served: Served) -> None:
    series = get(served, "/api/v1/admin/stats/timeseries")
    with served.serve.client() as client:
        rows = client.get(f"/api/v1/jobs/{served.job_id}/pages", params={"limit": 1000}).json()
    recent = [row for row in rows["pages"] if row["fetched_at"] >= series["start"]]
    assert len(series["bytes"]) == len(series["pages"]) == 600
    assert sum(series["bytes"]) == sum(row["content_length"] or 0 for row in recent) > 0


def test_a_snapshot_is_what_the_routes_answer(served: Served) -> None:
    with served.serve.client() as client, client.stream("GET", "/api/v1/events") as answer:
        assert answer.status_code == 200
        assert answer.headers["content-type"].startswith("text/event-stream")
        snapshot = Events(answer).take(1)[0].data
    stats = get(served, "/api/v1/admin/stats")
    series = get(served, "/api/v1/admin/stats/timeseries")
    errors = get(served, f"/api/v1/jobs/{served.job_id}/errors")
    jobs = get(served, "/api/v1/jobs")
    assert set(snapshot["stats"]) == set(stats) and snapshot["stats"]["storage"] == stats["storage"]
    assert snapshot["stats"]["jobs"] == stats["jobs"] == {"finished": 1}
    assert set(snapshot["series"]) == set(series) and sum(snapshot["series"]["pages"]) == sum(
        series["pages"]
    )
    assert snapshot["jobs"][0]["id"] == served.job_id
    assert set(snapshot["jobs"][0]) == set(jobs["jobs"][0])
    feed = sorted((row["url"], row["job"], row["error"]) for row in snapshot["errors"])
    assert feed == sorted((row["url"], served.job_id, row["error"]) for row in errors["errors"])
    with served.serve.client() as client:
        listed = client.get("/api/v1/admin/workers").json()
    ids = {worker["id"] for worker in snapshot["workers"]}
    assert ids == {worker["id"] for worker in listed} and ids
    assert ("dash-w0" in ids) == (served.backend == "distributed")


@pytest.mark.parametrize("backend", ["embedded", "distributed"])
def test_serve_stops_on_sigterm_while_a_dashboard_listens(
    backend: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    if backend == "embedded":
        serve = start_serve(tmp_path / "data", tmp_path / "serve.log")
    else:
        postgres: PostgresServer = request.getfixturevalue("postgres_server")
        url = postgres.create_database(f"t_dash_{time.time_ns()}")
        serve = start_dist_serve(tmp_path, request.getfixturevalue("redis_url"), url)
    try:
        with serve.client() as client, client.stream("GET", "/api/v1/events") as answer:
            events = Events(answer)
            assert events.take(1)[0].name == "snapshot"
            # Read on, as a dashboard does (a client that stops reading is another case).
            reading = threading.Thread(target=events.drain, daemon=True)
            reading.start()
            serve.process.send_signal(signal.SIGTERM)
            serve.process.wait(10)  # TimeoutExpired: it waits for the stream
            reading.join(10)
            assert not reading.is_alive(), "the stream ended"
    finally:
        serve.stop()
    assert "Traceback" not in serve.log()


def test_an_outage_of_redis_or_postgres_is_a_problem_event(
    tmp_path: Path, own_postgres: PostgresServer
) -> None:
    """The distributed backend's failures (each server in turn) reach the stream as
    `problem` events with a one-line detail; it goes on, and recovers with Redis."""
    redis = start_redis(tmp_path / "redis")
    serve = start_dist_serve(tmp_path, redis.url, own_postgres.url)
    try:
        with serve.client() as client, client.stream("GET", "/api/v1/events") as answer:
            events = Events(answer)
            assert events.take(1)[0].name == "snapshot"
            redis.stop()
            seen = events.take(3, timeout_s=60)
            assert seen[-1].name == "problem" and "\n" not in seen[-1].data["detail"], seen
            redis.start()
            seen = events.take(6, timeout_s=60)
            assert seen[-1].name == "snapshot", seen
            own_postgres.halt()
            seen = events.take(3, timeout_s=60)
            assert seen[-1].name == "problem", seen
    finally:
        serve.stop()
        redis.stop()
    assert "Traceback" not in serve.log(), serve.log()[-3000:]
