"""`trawler serve --redis --postgres` end to end: a real server process, two real
`trawler worker`s, real Redis and PostgreSQL, a real local site; every timing
judged from the site's access log (its own clock).

Each control test would fail without the control it checks: the site takes well
over 10 s to crawl at the delay used and the control is applied a couple of
seconds in, so workers that ignored it would log requests in the watched window.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx2
import psycopg
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.e2e.api_server import ServeProcess
from tests.e2e.conftest import Served, start_testsite
from tests.e2e.serve_dist import (
    HONOURED_S,
    TRAWLER,
    WATCH_S,
    create_job,
    exported_urls,
    fetch_counts,
    job,
    requests_after,
    start_dist_serve,
    start_workers,
    stop_all,
    wait_until,
)
from tests.e2e.test_crawl import CLOCK_SLACK_S
from tests.e2e.test_runner_controls import gaps_after
from tests.servers import PostgresServer, start_redis

pytestmark = pytest.mark.timeout(300)


def reachable(site: Served) -> set[str]:
    return set(site.site.reachable(site.seeds, None, "any"))


def test_jobs_crawl_on_two_workers_and_every_read_answers_over_postgres(
    tmp_path: Path, redis_url: str, fresh_postgres_url: str
) -> None:
    site = start_testsite(tmp_path, hosts=2, pages=15)
    serve, workers = start_dist_serve(tmp_path, redis_url, fresh_postgres_url), []
    try:
        client = serve.client()
        job_id = create_job(client, site, delay=0.05)
        workers = start_workers(tmp_path, redis_url, fresh_postgres_url)
        wait_until(lambda: job(client, job_id)["state"] == "finished", 180, "the job to finish")
        urls = exported_urls(client, job_id)
        assert len(urls) == len(set(urls)) and set(urls) == reachable(site)
        assert max(fetch_counts(site).values()) == 1, "a page fetched twice"
        _check_export_as_cli(client, fresh_postgres_url, job_id)
        _check_search_as_cli(client, fresh_postgres_url, job_id)
        info = job(client, job_id)
        assert info["pages_crawled"] == len(urls) and info["urls_queued"] == 0

        # Every worker seen by this Redis in the last hour is listed (other tests'
        # too, in a suite sharing one redis-server): ours are among them.
        # The job is finished when its last commit is; a worker still tearing its
        # crawl down (the one that did not end the job notices within 0.5 s) beats
        # "idle" as soon as its crawler is gone, not a heartbeat later.
        def ours() -> list[dict[str, Any]]:
            listed = {w["id"]: w for w in client.get("/api/v1/admin/workers").json()}
            return [listed[worker_id] for worker_id in ("w0", "w1")]

        wait_until(lambda: all(w["state"] == "idle" for w in ours()), 10, "idle workers")
        assert {w["pages"] for w in ours()} != {0}, "the workers shared the crawl"
        assert all(w["uptime_s"] > 1 for w in ours()), ours()
        _check_reads(serve, job_id, site, len(urls))
        _check_cli_agrees(redis_url, fresh_postgres_url, client, job_id)
    finally:
        stop_all(workers, serve, site)
    assert "Traceback" not in serve.log()


def _check_export_as_cli(client: httpx2.Client, postgres: str, job_id: str) -> None:
    """The API's export rows are `trawler export --postgres`'s, robots.txt rows included."""
    for kinds in ("page,sitemap", "page,sitemap,robots"):
        params = {"format": "jsonl", "kind": kinds.split(",")}
        api = client.get(f"/api/v1/jobs/{job_id}/export", params=params).text
        command = [*TRAWLER, "export", "--postgres", postgres, "--job", job_id, "--kind", kinds]
        out = subprocess.run(command, capture_output=True, text=True, timeout=60)
        assert out.returncode == 0, out.stderr
        api_rows = [json.loads(line) for line in api.splitlines()]
        assert api_rows == [json.loads(line) for line in out.stdout.splitlines()]
        assert any(row["kind"] == "robots" for row in api_rows) == ("robots" in kinds)


def _check_search_as_cli(client: httpx2.Client, postgres: str, job_id: str) -> None:
    """The API's search (issue 17) answers as `trawler search --postgres`: the same
    hits in the same order, the same snippets, and the total counts them all."""
    titles = client.get(f"/api/v1/jobs/{job_id}/pages", params={"limit": 50}).json()["pages"]
    term = next(w for p in titles for w in (p["title"] or "").split() if w.isalpha())
    answer = client.get("/api/v1/search", params={"q": term, "job": job_id, "limit": 100})
    assert answer.status_code == 200, answer.text
    hits = answer.json()["results"]
    command = [*TRAWLER, "search", term, "--postgres", postgres, "--job", job_id, "--json",
               "--limit", "100"]  # fmt: skip
    out = subprocess.run(command, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    cli = [json.loads(line) for line in out.stdout.splitlines()]
    assert hits and [(h["url"], h["snippet"]) for h in hits] == [
        (h["url"], h["snippet"]) for h in cli]  # fmt: skip
    assert answer.json()["total"] == len(hits) and any("**" in h["snippet"] for h in hits)
    every_job = client.get("/api/v1/search", params={"q": term, "limit": 100}).json()
    assert {h["url"] for h in every_job["results"]} == {h["url"] for h in hits}
    assert client.get("/api/v1/search", params={"q": term, "since": "2999-01-01"}).json() == {
        "results": [], "total": 0}  # fmt: skip


def _check_reads(serve: ServeProcess, job_id: str, site: Served, stored: int) -> None:
    client = serve.client()
    pages = client.get(f"/api/v1/jobs/{job_id}/pages", params={"limit": 5, "offset": 2}).json()
    assert pages["total"] == stored and len(pages["pages"]) == 5
    host = pages["pages"][0]["url"].split("/")[2]
    one_host = client.get(f"/api/v1/jobs/{job_id}/pages", params={"host": host}).json()
    assert 0 < one_host["total"] < stored
    errors = client.get(f"/api/v1/jobs/{job_id}/errors").json()
    assert errors["total"] == job(client, job_id)["errors"] == sum(errors["by_code"].values())
    url = pages["pages"][0]["url"]
    report = client.get("/api/v1/urls", params={"url": url, "job": job_id}).json()
    assert report["state"] == "done" and report["fetches"] and report["status"] == 200
    hosts = client.get("/api/v1/hosts", params={"job": job_id}).json()
    assert hosts["total"] == 2 and sum(h["fetched"] for h in hosts["hosts"]) == stored
    assert client.get(f"/api/v1/hosts/{host}", params={"job": job_id}).json()["fetched"] > 0
    stats = client.get("/api/v1/admin/stats").json()
    assert stats["storage"]["pages"] == stored and stats["queue"]["pending"] == 0
    series = client.get("/api/v1/admin/stats/timeseries").json()
    assert sum(series["pages"]) == stored
    families = {f.name: f for f in text_string_to_metric_families(client.get("/metrics").text)}
    fetched = families["trawler_pages_fetched"].samples
    totals = [(s.labels, s.value) for s in fetched if s.name.endswith("_total")]
    assert totals == [({"job": job_id}, stored)]
    assert families["trawler_fetch_duration_seconds"].samples
    _check_versions_before_a_pass(client, job_id, url)
    assert client.get("/health").json()["status"] == "ok"


def _check_versions_before_a_pass(client: httpx2.Client, job_id: str, url: str) -> None:
    """Never revisited (test_recrawl_pass_distributed.py revisits): a page has no
    versions beyond its row, and the export's rows are the pages, whichever asked."""
    versions = client.get(f"/api/v1/jobs/{job_id}/versions", params={"url": url})
    assert versions.status_code == 404 and "not revisited yet" in versions.json()["detail"]
    every = client.get(f"/api/v1/jobs/{job_id}/export", params={"versions": "all"})
    latest = client.get(f"/api/v1/jobs/{job_id}/export", params={"versions": "latest"})
    assert every.status_code == latest.status_code == 200 and every.text == latest.text
    assert "version" not in json.loads(latest.text.splitlines()[0])
    assert client.post("/api/v1/jobs/nope/recrawl").status_code == 404


def _check_cli_agrees(redis: str, postgres: str, client: httpx2.Client, job_id: str) -> None:
    command = [*TRAWLER, "jobs", "show", job_id, "--redis", redis, "--postgres", postgres]
    out = subprocess.run([*command, "--json"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    shown, api = json.loads(out.stdout), job(client, job_id)
    for key in ("id", "state", "pages_crawled", "errors", "urls_queued", "created_at"):
        assert shown[key] == api[key], key
    out = subprocess.run([*TRAWLER, "jobs", "list", "--postgres", postgres, "--json"],
                         capture_output=True, text=True, timeout=60)  # fmt: skip
    listed = json.loads(out.stdout)
    api_list = client.get("/api/v1/jobs").json()
    assert [j["id"] for j in listed["jobs"]] == [j["id"] for j in api_list["jobs"]]
    assert listed["total"] == api_list["total"]


def _running_job(tmp: Path, redis: str, postgres: str, **options: object):  # noqa: ANN202
    site = start_testsite(tmp, hosts=2, pages=40)
    serve = start_dist_serve(tmp, redis, postgres)
    client = serve.client()
    job_id = create_job(client, site, delay=0.25, **options)
    workers = start_workers(tmp, redis, postgres)
    wait_until(lambda: len(site.log()) >= 8, 90, "the workers to fetch pages")
    return site, serve, workers, client, job_id


def assert_quiet_after(site: Served, moment: float, what: str, host: str | None = None) -> None:
    time.sleep(WATCH_S)
    late = requests_after(site, moment + HONOURED_S, host)
    assert not late, f"{len(late)} request(s) more than {HONOURED_S} s after {what}: {late[:3]}"


def test_pause_stops_requests_within_2s_and_resume_loses_nothing(
    tmp_path: Path, redis_url: str, fresh_postgres_url: str
) -> None:
    site, serve, workers, client, job_id = _running_job(tmp_path, redis_url, fresh_postgres_url)
    try:
        assert client.post(f"/api/v1/jobs/{job_id}/pause").json()["state"] == "paused"
        paused_at = time.time()
        assert_quiet_after(site, paused_at, "the pause")
        assert all(w.poll() is None for w in workers), "workers outlive a paused job"
        assert client.post(f"/api/v1/jobs/{job_id}/resume").json()["state"] == "running"
        resumed_at = time.time()
        wait_until(lambda: job(client, job_id)["state"] == "finished", 180, "the job to finish")
        urls = exported_urls(client, job_id)
    finally:
        stop_all(workers, serve, site)
    assert requests_after(site, resumed_at), "the resumed job carried on"
    assert len(urls) == len(set(urls)) and set(urls) == reachable(site)
    assert max(fetch_counts(site).values()) == 1, "a page fetched twice"


def test_cancel_keeps_what_was_stored(
    tmp_path: Path, redis_url: str, fresh_postgres_url: str
) -> None:
    site, serve, workers, client, job_id = _running_job(tmp_path, redis_url, fresh_postgres_url)
    try:
        assert client.post(f"/api/v1/jobs/{job_id}/cancel").json()["state"] == "cancelled"
        assert_quiet_after(site, time.time(), "the cancel")
        urls = exported_urls(client, job_id)
        again = client.post(f"/api/v1/jobs/{job_id}/resume")
    finally:
        stop_all(workers, serve, site)
    assert sorted(urls) == sorted(fetch_counts(site))
    assert 0 < len(urls) < len(reachable(site))
    assert again.status_code == 409


def test_a_blocklisted_domain_gets_no_further_request(
    tmp_path: Path, redis_url: str, fresh_postgres_url: str
) -> None:
    site, serve, workers, client, job_id = _running_job(tmp_path, redis_url, fresh_postgres_url)
    blocked = site.seeds[0].split("/")[2]
    try:
        domain = {"domain": blocked.rsplit(":", 1)[0], "reason": "test"}
        answer = client.post("/api/v1/admin/blocklist", json=domain)
        assert answer.status_code == 201, answer.text
        blocked_at = time.time()
        wait_until(lambda: job(client, job_id)["state"] == "finished", 180, "the job to finish")
        listed = client.get("/api/v1/admin/blocklist").json()
    finally:
        stop_all(workers, serve, site)
    assert [e["domain"] for e in listed] == [blocked.rsplit(":", 1)[0]]
    late = requests_after(site, blocked_at + HONOURED_S, blocked)
    assert not late, f"{len(late)} request(s) to the blocked host: {late[:3]}"
    other = site.seeds[1].split("/")[2]
    assert requests_after(site, blocked_at + HONOURED_S, other), "the other host went on"
    with psycopg.connect(fresh_postgres_url) as conn:
        row = conn.execute("SELECT sum(value) FROM counters WHERE job_id = %s"
                           " AND name = 'skipped.blocklist'", (job_id,)).fetchone()  # fmt: skip
    assert row is not None and row[0] and row[0] > 0, "blocked URLs recorded as skipped"


def test_a_politeness_change_reaches_the_workers(
    tmp_path: Path, redis_url: str, fresh_postgres_url: str
) -> None:
    site, serve, workers, client, job_id = _running_job(tmp_path, redis_url, fresh_postgres_url)
    try:
        before = time.time()
        time.sleep(2)
        put = client.put("/api/v1/admin/settings/politeness", json={"delay": 1.2})
        assert put.status_code == 200 and put.json()["delay"] == 1.2, put.text
        changed_at = time.time()
        time.sleep(8)
        client.put("/api/v1/admin/settings/politeness", json={})
    finally:
        stop_all(workers, serve, site)
    log = site.log()
    fast = gaps_after([e for e in log if e["t"] < changed_at], before)
    assert fast and min(fast) < 0.8, "the job's own delay was shorter (the check can fail)"
    slowed = gaps_after([e for e in log if e["t"] < changed_at + 8], changed_at + HONOURED_S)
    assert len(slowed) >= 4 and min(slowed) >= 1.2 - CLOCK_SLACK_S, slowed


def test_health_is_503_while_either_server_is_down(
    tmp_path: Path, own_postgres: PostgresServer
) -> None:
    redis = start_redis(tmp_path / "redis")
    serve = start_dist_serve(tmp_path, redis.url, own_postgres.url)
    try:
        client = serve.client()
        assert client.get("/health").status_code == 200
        redis.stop()
        assert client.get("/health").status_code == 503
        for path in ("/api/v1/admin/workers", "/api/v1/admin/stats", "/metrics"):
            assert client.get(path).status_code == 503, path
        redis.start()
        assert client.get("/health").status_code == 200, "back with Redis"
        own_postgres.halt()
        health = client.get("/health")
        assert health.status_code == 503 and health.json()["status"] == "unavailable"
        for path in ("/api/v1/jobs", "/api/v1/admin/stats", "/api/v1/admin/blocklist"):
            assert client.get(path).status_code == 503, path
    finally:
        serve.stop()
        redis.stop()
    assert "Traceback" not in serve.log()


def test_bad_or_unreachable_servers_are_one_line_errors(
    redis_url: str, fresh_postgres_url: str
) -> None:
    from tests.e2e.cli_checks import assert_one_line_error
    from tests.servers import free_port

    def serve(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([*TRAWLER, "serve", "--port", "0", *args],
                              capture_output=True, text=True, timeout=60)  # fmt: skip

    no_pg = f"postgresql://127.0.0.1:{free_port()}/x"
    no_redis = f"redis://127.0.0.1:{free_port()}/0"
    assert_one_line_error(serve("--redis", "http://nope", "--postgres", fresh_postgres_url), 2)
    assert_one_line_error(serve("--redis", redis_url), 2)
    down = assert_one_line_error(serve("--redis", redis_url, "--postgres", no_pg), 1)
    assert "PostgreSQL" in down
    down = assert_one_line_error(serve("--redis", no_redis, "--postgres", fresh_postgres_url), 1)
    assert "Redis" in down


def test_schemathesis_finds_no_5xx_over_the_distributed_backend(
    tmp_path: Path, redis_url: str, fresh_postgres_url: str
) -> None:
    """Every operation fuzzed against the distributed server, with NO worker running:
    jobs the fuzzer creates are recorded and queued, and nothing ever fetches them
    (nor anything off loopback). Search answers too (no 501 since issue 17)."""
    serve = start_dist_serve(tmp_path, redis_url, fresh_postgres_url, allow_private=False)
    try:
        answer = serve.client().post("/api/v1/jobs", json={"seeds": ["http://example.com/"]})
        assert answer.status_code == 201, answer.text
        job_id = answer.json()["id"]
        config = tmp_path / "schemathesis.toml"
        config.write_text(f'[parameters]\n"path.job_id" = "{job_id}"\n\n'
                          '[checks.not_a_server_error]\n'
                          'expected-statuses = ["2xx", "3xx", "4xx"]\n')  # fmt: skip
        checks = ("not_a_server_error,status_code_conformance,content_type_conformance,"
                  "response_headers_conformance,response_schema_conformance")  # fmt: skip
        cmd = [sys.executable, "-m", "schemathesis.cli", "--config-file", str(config), "run",
               f"{serve.base}/openapi.json", "-H", f"Authorization: Bearer {serve.token}",
               "--checks", checks, "--max-examples", "25", "--workers", "1", "--seed", "12",
               "--phases", "examples,coverage,fuzzing", "--request-timeout", "20",
               "--suppress-health-check", "all",
               # The event stream never ends: a request of it could only time out.
               "--exclude-path", "/api/v1/events"]  # fmt: skip
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=400, cwd=tmp_path)
    finally:
        serve.stop()
    report = "\n".join(line[:300] for line in out.stdout.splitlines() if "━" not in line)
    assert out.returncode == 0, report[-8000:] + out.stderr[-2000:]
    assert "1 failed" not in out.stdout and " passed" in out.stdout
    assert "Traceback" not in serve.log(), serve.log()[-3000:]


def test_text_no_row_can_hold_is_not_found_never_a_5xx(
    tmp_path: Path, redis_url: str, fresh_postgres_url: str
) -> None:
    """PostgreSQL refuses NUL in text: a job id or host with one matches nothing
    (404, or nothing found), never a 503 that would blame the store."""
    serve = start_dist_serve(tmp_path, redis_url, fresh_postgres_url, allow_private=False)
    try:
        client = serve.client()
        job_id = client.post("/api/v1/jobs", json={"seeds": ["http://example.com/"]}).json()["id"]
        for path in ("/api/v1/jobs/a%00b", "/api/v1/jobs/a%00b/errors", "/api/v1/hosts?job=a%00",
                     f"/api/v1/hosts/a%00b?job={job_id}", "/api/v1/jobs/a%00b/export"):  # fmt: skip
            answer = client.get(path)
            assert answer.status_code == 404, (path, answer.text)
        assert client.post("/api/v1/jobs/a%00b/pause").status_code == 404
        pages = client.get(f"/api/v1/jobs/{job_id}/pages", params={"host": "a\x00"})
        assert pages.status_code == 200 and pages.json()["total"] == 0, pages.text
    finally:
        serve.stop()
    assert "WARNING" not in serve.log(), serve.log()
