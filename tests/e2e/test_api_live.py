"""The API over a data directory while `trawler crawl` is writing it."""

from __future__ import annotations

import signal
import time
from pathlib import Path

from tests.e2e.api_server import ServeProcess, start_serve
from tests.e2e.cli_checks import wait_until
from tests.e2e.conftest import export_rows, start_testsite
from tests.e2e.test_crash import start_crawl


def test_a_running_crawl_is_seen_live_then_paused(tmp_path: Path) -> None:
    served = start_testsite(tmp_path, hosts=2, pages=40)
    data = tmp_path / "data"
    api: ServeProcess | None = None
    crawler = start_crawl(served, data, "--delay", "0.25")
    try:
        wait_until(lambda: (data / "jobs.db").exists(), 30, "the crawl's job registry")
        api = start_serve(data, tmp_path / "serve.log", token="live-token-123")
        with api.client() as client:

            def running_at_a_pace() -> bool:
                jobs = client.get("/api/v1/jobs").json()["jobs"]
                return bool(jobs) and jobs[0]["state"] == "running" and not jobs[0][
                    "seeding"] and jobs[0]["pages_crawled"] >= 6  # fmt: skip

            wait_until(running_at_a_pace, 60, "the job running, six pages stored")
            job = client.get("/api/v1/jobs").json()["jobs"][0]
            # Two hosts at one request per 0.25 s: about 8 pages/s, 80 pages in all.
            assert 1 < job["pages_per_s"] < 12, job
            assert job["urls_queued"] > 0 and job["estimated_completion"] > time.time()
            assert client.get("/api/v1/admin/stats").json()["throughput"]["last_1m"] > 0
            # Pause and resume through the API: state changes in the job store, which
            # the running `trawler crawl` follows.
            paused = client.post(f"/api/v1/jobs/{job['id']}/pause")
            assert paused.status_code == 200 and paused.json()["state"] == "paused", paused.text
            resumed = client.post(f"/api/v1/jobs/{job['id']}/resume")
            assert resumed.status_code == 200 and resumed.json()["state"] == "running"
            crawler.send_signal(signal.SIGINT)  # Ctrl-C: the job stops where it is
            crawler.communicate(timeout=30)
            job = client.get(f"/api/v1/jobs/{job['id']}").json()
            exported = client.get(f"/api/v1/jobs/{job['id']}/export",
                                  params={"include_noindex": True}).text.splitlines()  # fmt: skip
        assert crawler.returncode == 130
        assert job["state"] == "paused" and job["estimated_completion"] is None
        assert job["pages_crawled"] == len(exported) == len(export_rows(data))
        assert job["urls_queued"] > 0  # stopped before the end: there is more to crawl
    finally:
        if crawler.poll() is None:
            crawler.kill()
        if api is not None:
            api.stop()
        served.process.terminate()
        served.process.wait(10)
