"""The servers the dashboard's browser tests drive: a live `trawler serve` that may
crawl the generated test site on loopback, and one serving a finished crawl of the
scripted site (its robots.txt disallows /private)."""

from __future__ import annotations

from collections.abc import Iterator

import httpx2
import pytest

from tests.e2e.api_server import ServeProcess, crawl_scripted_site, start_serve
from tests.e2e.conftest import Served, start_testsite


@pytest.fixture(scope="module", name="site")
def dashboard_site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    served = start_testsite(tmp_path_factory.mktemp("dash-site"), hosts=3, pages=300)
    yield served
    served.process.terminate()
    served.process.wait(10)


@pytest.fixture(scope="module", name="live")
def live_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServeProcess]:
    """A server with no job yet that may crawl loopback."""
    tmp = tmp_path_factory.mktemp("dash-live")
    served = start_serve(tmp / "data", tmp / "serve.log", "--allow-private")
    yield served
    served.stop()
    assert "Traceback" not in served.log()


@pytest.fixture(scope="module", name="finished")
def finished_server(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[ServeProcess, str]]:
    """A server of a finished crawl of the scripted site (robots.txt: Disallow: /private),
    and the site's base URL."""
    tmp = tmp_path_factory.mktemp("dash-finished")
    data, site_base = crawl_scripted_site(tmp)
    served = start_serve(data, tmp / "serve.log", "--max-running-jobs", "0")
    yield served, site_base
    served.stop()


def create_job(client: httpx2.Client, site: Served, **options: object) -> str:
    body = {"seeds": site.seeds, "allow_private": True, "scope": "any", "sitemaps": False,
            "max_attempts": 1, **options}  # fmt: skip
    answer = client.post("/api/v1/jobs", json=body)
    assert answer.status_code == 201, answer.text
    return str(answer.json()["id"])


def jobs_now(serve: ServeProcess) -> list[dict]:
    with serve.client() as client:
        answer = client.get("/api/v1/jobs")
    assert answer.status_code == 200, answer.text
    return list(answer.json()["jobs"])


def job_state(serve: ServeProcess, job_id: str) -> str:
    with serve.client() as client:
        return str(client.get(f"/api/v1/jobs/{job_id}").json()["state"])
