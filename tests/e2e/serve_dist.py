"""`trawler serve --redis --postgres` and its `trawler worker`s, as real processes."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import httpx2

from tests.e2e.api_server import ServeProcess, start_serve
from tests.e2e.conftest import Served

TRAWLER = [sys.executable, "-m", "trawler"]
HONOURED_S = 2.0  # the bound
WATCH_S = 4.0  # how long a stopped job's host is watched for requests


def start_dist_serve(
    tmp: Path, redis: str, postgres: str, allow_private: bool = True
) -> ServeProcess:
    """The server (``--allow-private``: the test site is on loopback)."""
    private = ["--allow-private"] if allow_private else []
    return start_serve(tmp / "unused-data", tmp / "serve.log", "--redis", redis,
                       "--postgres", postgres, *private)  # fmt: skip


def start_workers(tmp: Path, redis: str, postgres: str, count: int = 2) -> list[subprocess.Popen]:
    workers = []
    for n in range(count):
        log = (tmp / f"worker{n}.log").open("wb")
        workers.append(subprocess.Popen(
            [*TRAWLER, "worker", "--redis", redis, "--postgres", postgres, "--warc-dir",
             str(tmp / f"warc{n}"), "--worker-id", f"w{n}", "--lease-timeout", "10", "-q"],
            stdout=subprocess.DEVNULL, stderr=log,
        ))  # fmt: skip
    return workers


def stop_all(workers: list[subprocess.Popen], serve: ServeProcess | None, site: Served) -> None:
    for worker in workers:
        if worker.poll() is None:
            worker.terminate()
    for worker in workers:
        try:
            worker.wait(30)
        except subprocess.TimeoutExpired:
            worker.kill()
    if serve is not None:
        serve.stop()
    site.process.terminate()
    site.process.wait(10)


def create_job(client: httpx2.Client, site: Served, **options: object) -> str:
    body = {"seeds": site.seeds, "allow_private": True, "scope": "any", "sitemaps": False,
            "max_attempts": 1, **options}  # fmt: skip
    answer = client.post("/api/v1/jobs", json=body)
    assert answer.status_code == 201, answer.text
    return answer.json()["id"]


def job(client: httpx2.Client, job_id: str) -> dict:
    answer = client.get(f"/api/v1/jobs/{job_id}")
    assert answer.status_code == 200, answer.text
    return answer.json()


def wait_until(check: Callable[[], bool], timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.2)


def exported_urls(client: httpx2.Client, job_id: str) -> list[str]:
    import json

    answer = client.get(f"/api/v1/jobs/{job_id}/export", params={"format": "jsonl"})
    assert answer.status_code == 200, answer.text
    return [json.loads(line)["url"] for line in answer.text.splitlines() if line.strip()]


def fetch_counts(site: Served) -> dict[str, int]:
    """Page requests (not robots.txt) per URL, from the access log."""
    counts: dict[str, int] = {}
    for entry in site.log():
        if entry["path"] != "/robots.txt":
            url = f"http://{entry['host']}{entry['path']}"
            counts[url] = counts.get(url, 0) + 1
    return counts


def requests_after(site: Served, moment: float, host: str | None = None) -> list[dict]:
    return [e for e in site.log() if e["t"] > moment and (host is None or e["host"] == host)]
