"""`trawler serve` as a process: the token, the refusals, errors that are never a
500, /health, and schemathesis fuzzing the whole OpenAPI schema. The server runs
no job (``--max-running-jobs 0``): jobs the fuzzer creates wait pending, so no
request ever leaves for the hosts its seeds name."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.api_server import ServeProcess, crawl_scripted_site, start_serve
from tests.e2e.cli_checks import assert_one_line_error
from tests.e2e.conftest import run_trawler


@pytest.fixture(scope="module")
def crawled(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    return crawl_scripted_site(tmp_path_factory.mktemp("api-serve-crawl"))


@pytest.fixture(scope="module")
def server(
    crawled: tuple[Path, str], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ServeProcess]:
    log = tmp_path_factory.mktemp("api-serve") / "serve.log"
    served = start_serve(crawled[0], log, "--max-running-jobs", "0")
    yield served
    served.stop()


@pytest.fixture(scope="module")
def job_id(server: ServeProcess) -> str:
    with server.client() as client:
        return str(client.get("/api/v1/jobs").json()["jobs"][0]["id"])


def test_every_api_route_needs_the_token(server: ServeProcess) -> None:
    with server.client(token=None) as anonymous:
        schema = anonymous.get("/openapi.json").json()
        assert anonymous.get("/health").status_code == 200
        assert anonymous.get("/metrics").status_code == 200
    routes = [(method, path) for path, item in schema["paths"].items() for method in item]
    api = [(m, p) for m, p in routes if p.startswith("/api/v1/")]
    assert len(api) >= 20 and len(routes) == len(api) + 2  # /health and /metrics aside
    for token in (None, "wrong-token-value"):
        with server.client(token=token) as client:
            for method, path in api:
                answer = client.request(method.upper(), path.replace("{", "").replace("}", ""))
                assert answer.status_code == 401, (method, path, answer.text)
                assert answer.headers["www-authenticate"] == "Bearer"
    with server.client() as client:  # the check can fail: the right token gets in
        assert client.get("/api/v1/jobs").status_code == 200


def test_a_generated_token_is_printed_once(server: ServeProcess) -> None:
    assert server.log().count(server.token) == 1
    assert len(server.token) >= 32


def test_token_from_the_environment_is_not_printed(tmp_path: Path) -> None:
    served = start_serve(tmp_path / "empty", tmp_path / "serve.log", token="from-the-env-123")
    try:
        with served.client() as client:
            assert client.get("/api/v1/jobs").json() == {"jobs": [], "total": 0,
                                                         "offset": 0, "limit": 100}  # fmt: skip
            assert client.get("/health").json()["status"] == "ok"  # no crawl yet is healthy
        with served.client(token="something-else") as client:
            assert client.get("/api/v1/jobs").status_code == 401
        assert "from-the-env-123" not in served.log() and "API token" not in served.log()
    finally:
        served.stop()


def test_a_non_loopback_address_needs_a_token(tmp_path: Path) -> None:
    out = run_trawler("serve", "--data", str(tmp_path), "--host", "0.0.0.0", "--port", "0",
                      timeout=60)  # fmt: skip
    line = assert_one_line_error(out, 2)
    assert "without a token" in line
    out = run_trawler("serve", "--data", str(tmp_path), "--token", "short", timeout=60)
    assert "at least 8" in assert_one_line_error(out, 2)


def test_a_busy_port_is_a_one_line_error(server: ServeProcess, tmp_path: Path) -> None:
    port = server.base.rsplit(":", 1)[1]
    out = run_trawler("serve", "--data", str(tmp_path), "--port", port, timeout=60)
    assert "cannot listen" in assert_one_line_error(out, 1)


BAD_BODIES = [
    ({"seeds": ["http://example.com/"], "max_depth": -1}, ["body", "max_depth"]),
    ({"seeds": ["http://example.com/"], "delay": "soon"}, ["body", "delay"]),
    ({"seeds": ["http://example.com/"], "include": ["(unclosed"]}, ["body", "include"]),
    ({"seeds": ["http://example.com/"], "concurrency": 0}, ["body", "concurrency"]),
    ({"seeds": ["http://example.com/"], "robots_agent": "bad token!"}, ["body", "robots_agent"]),
    ({"seeds": ["http://example.com/"], "no_such_option": 1}, ["body", "no_such_option"]),
    ({"seeds": ["http://example.com/"], "priority": "pagerank"}, ["body", "priority"]),
    ({"seeds": []}, ["body", "seeds"]),
    ({"seeds": ["ftp://example.com/"]}, ["body", "seeds", 0]),
    ({"seeds": ["http://example.com/", "http://127.0.0.1/"]}, ["body", "seeds", 1]),
    ({"seeds": ["http://example.com/"], "allow_private": True}, ["body", "allow_private"]),
    ({}, ["body", "seeds"]),
]


def test_a_bad_body_is_a_422_naming_the_field(server: ServeProcess) -> None:
    with server.client() as client:
        for body, loc in BAD_BODIES:
            answer = client.post("/api/v1/jobs", json=body)
            assert answer.status_code == 422, (body, answer.text)
            assert answer.json()["detail"][0]["loc"] == loc, (body, answer.json())
            assert str(loc[1]) in answer.json()["error"]
        for raw in (b"{not json", b"\xff\xfe", b"[1, 2]", b""):
            answer = client.post("/api/v1/jobs", content=raw,
                                 headers={"Content-Type": "application/json"})  # fmt: skip
            assert answer.status_code == 422, (raw, answer.text)
        answer = client.get("/api/v1/jobs", params={"state": "sleeping", "limit": 0})
        assert answer.status_code == 422
        assert {tuple(e["loc"]) for e in answer.json()["detail"]} == {
            ("query", "state", 0), ("query", "limit")}  # fmt: skip


def test_job_control_over_a_finished_job_and_a_waiting_one(
    server: ServeProcess, job_id: str
) -> None:
    with server.client() as client:
        job = client.get(f"/api/v1/jobs/{job_id}").json()
        assert job["state"] == "finished" and job["finished_at"] >= job["created_at"]
        assert job["options"]["delay"] == 0.0 and job["options"]["max_attempts"] == 1
        assert job["estimated_completion"] is None
        for action in ("pause", "resume", "cancel"):  # a finished job stays finished
            answer = client.post(f"/api/v1/jobs/{job_id}/{action}")
            assert answer.status_code == 409, answer.text
            assert "finished" in answer.json()["detail"]
            assert client.post(f"/api/v1/jobs/nope/{action}").status_code == 404
        assert client.get("/api/v1/jobs/nope").json() == {"detail": "no job 'nope'"}
        assert client.get("/api/v1/jobs", params={"state": "running"}).json()["total"] == 0
        created = client.post("/api/v1/jobs", json={"seeds": ["http://example.com/"]})
        assert created.status_code == 201, created.text
        waiting = created.json()
        assert waiting["state"] == "pending" and waiting["urls_queued"] == 1
        answer = client.post(f"/api/v1/jobs/{waiting['id']}/resume")  # no slot: it waits
        assert answer.status_code == 409 and "--max-running-jobs" in answer.json()["detail"]
        answer = client.post(f"/api/v1/jobs/{waiting['id']}/cancel")
        assert answer.status_code == 200 and answer.json()["state"] == "cancelled"


def test_an_unreadable_store_is_a_503_not_a_500(tmp_path: Path) -> None:
    data = tmp_path / "data"
    served = start_serve(data, tmp_path / "serve.log", "--max-running-jobs", "0",
                         token="token-for-503")  # fmt: skip
    try:
        (data / "jobs.db").write_bytes(b"this is not a database" * 100)
        (data / "jobs.db-wal").unlink(missing_ok=True)
        with served.client() as client:
            health = client.get("/health")
            assert health.status_code == 503 and health.json()["status"] == "unavailable"
            assert "not a database" in health.json()["detail"]
            for path in ("/api/v1/jobs", "/api/v1/admin/stats", "/api/v1/search?q=x", "/metrics"):
                answer = client.get(path)
                assert answer.status_code == 503, (path, answer.text)
        assert "Traceback" not in served.log()
    finally:
        served.stop()


def test_a_directory_that_is_not_trawler_data_is_a_one_line_error(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    (data / "trawler.db").write_bytes(b"this is not a database" * 100)
    out = run_trawler("serve", "--data", str(data), "--port", "0", "--token", "token-123456")
    assert "cannot use data directory" in assert_one_line_error(out, 1)


def test_schemathesis_finds_no_5xx_and_no_schema_mismatch(
    server: ServeProcess, job_id: str, tmp_path: Path
) -> None:
    """Every operation fuzzed (the coverage phase walks each parameter's edges), with
    the real job's id for half the calls; every answer checked against the schema."""
    config = tmp_path / "schemathesis.toml"
    config.write_text(f'[parameters]\n"path.job_id" = "{job_id}"\n\n[checks.not_a_server_error]\n'
                      'expected-statuses = ["2xx", "3xx", "4xx"]\n')  # fmt: skip
    checks = ("not_a_server_error,status_code_conformance,content_type_conformance,"
              "response_headers_conformance,response_schema_conformance")  # fmt: skip
    cmd = [sys.executable, "-m", "schemathesis.cli", "--config-file", str(config), "run",
           f"{server.base}/openapi.json", "-H", f"Authorization: Bearer {server.token}",
           "--checks", checks, "--max-examples", "25", "--workers", "1", "--seed", "12",
           "--phases", "examples,coverage,fuzzing", "--request-timeout", "20",
           # Hypothesis' own speed checks judge the machine's load, not the API.
           "--suppress-health-check", "all",
           # The event stream never ends: a request of it could only time out.
           "--exclude-path", "/api/v1/events"]  # fmt: skip
    # In tmp_path: schemathesis keeps a cache of crashes in its working directory.
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=400, cwd=tmp_path)
    report = "\n".join(line[:300] for line in out.stdout.splitlines() if "━" not in line)
    assert out.returncode == 0, report[-8000:] + out.stderr[-2000:]
    assert "1 failed" not in out.stdout and " passed" in out.stdout
    assert "Traceback" not in server.log()
