"""The dashboard over `trawler serve --redis --postgres` with `trawler worker`s: it
loads, goes live, lists the workers and marks one that stopped beating, and searches."""

from __future__ import annotations

from pathlib import Path

import pytest
from playwright.sync_api import Browser, expect

from tests.e2e.browser import (
    WAIT_MS,
    chromium_browser,  # noqa: F401  (the fixture `browser`)
    expect_live,
    open_dashboard,
)
from tests.e2e.conftest import start_testsite
from tests.e2e.serve_dist import (
    create_job,
    start_dist_serve,
    start_workers,
    stop_all,
    wait_until,
)
from tests.servers import start_redis

STALE_WAIT_MS = 40_000  # the registry calls a worker gone after 10 s without a beat

# The first test of a module may wait for apt-get to install chromium (about a
# minute on a fresh machine): its setup counts in its timeout.
pytestmark = pytest.mark.timeout(300)


def test_the_dashboard_over_the_distributed_backend(
    browser: Browser, tmp_path: Path, redis_url: str, fresh_postgres_url: str
) -> None:
    site = start_testsite(tmp_path, hosts=2, pages=40)
    serve = start_dist_serve(tmp_path, redis_url, fresh_postgres_url)
    workers = start_workers(tmp_path, redis_url, fresh_postgres_url, count=2)
    try:
        with serve.client() as client:
            job_id = create_job(client, site, delay=0.2)
        page, console = open_dashboard(browser, serve.base, serve.token, "workers")
        expect_live(page)
        for worker_id in ("w0", "w1"):
            row = page.locator(f"table[data-testid=workers-table] tr[data-worker-id={worker_id}]")
            expect(row).to_have_attribute("data-stale", "false", timeout=WAIT_MS)
        workers[1].kill()  # stops beating, as on a lost machine
        stale = page.locator("tr[data-worker-id=w1]")
        expect(stale).to_have_attribute("data-stale", "true", timeout=STALE_WAIT_MS)
        expect(stale).to_contain_text("stale")
        expect(page.locator("tr[data-worker-id=w0]")).to_have_attribute("data-stale", "false")
        page.click('nav a[href="#/jobs"]')
        expect(page.locator(f"tr[data-job-id='{job_id}']")).to_be_visible(timeout=WAIT_MS)
        # The search below is asked once: wait until the index has a page to find
        # (CI, a loaded machine: the dashboard searched before any commit, 0 pages).
        with serve.client() as client:

            def indexed() -> bool:
                answer = client.get("/api/v1/search", params={"q": "host", "job": job_id})
                return answer.status_code == 200 and answer.json()["total"] > 0

            wait_until(indexed, WAIT_MS / 1000, "a page in the full-text index")
        page.click('nav a[href="#/search"]')
        page.fill("#search-q", "host")  # in every title of the test site ("Host 0 …")
        page.press("#search-q", "Enter")  # PostgreSQL's full-text index (issue 17)
        results = page.locator("[data-testid=search-results] li")
        expect(results.first).to_be_visible(timeout=WAIT_MS)
        expect(results.first.locator("mark").first).to_have_text("host", ignore_case=True)
        assert console.errors == []
        page.context.close()
    finally:
        stop_all(workers, serve, site)


def test_a_store_outage_is_shown_and_clears_when_the_store_is_back(
    browser: Browser, tmp_path: Path, fresh_postgres_url: str
) -> None:
    redis = start_redis(tmp_path / "redis")
    serve = start_dist_serve(tmp_path, redis.url, fresh_postgres_url)
    try:
        page, console = open_dashboard(browser, serve.base, serve.token)
        expect_live(page)
        problem = page.locator("#live-problem")
        expect(problem).to_be_hidden()
        redis.stop()  # the stream goes on with `problem` events
        expect(problem).to_be_visible(timeout=WAIT_MS)
        expect(problem).not_to_be_empty()
        redis.start()
        expect(problem).to_be_hidden(timeout=30_000)
        expect_live(page)
        assert console.errors == []
        page.context.close()
    finally:
        serve.stop()
        redis.stop()
    assert "Traceback" not in serve.log()
