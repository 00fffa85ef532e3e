"""The dashboard in a real browser (Debian's chromium, Playwright) against a real
`trawler serve` on loopback: its views, live numbers, job controls and forms, search,
the URL analyser, the token. Servers: tests/e2e/dashboard_servers.py."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from playwright.sync_api import Browser, Page, expect

from tests.e2e.api_server import ServeProcess, start_serve
from tests.e2e.browser import (
    ROUTES,
    WAIT_MS,
    chromium_browser,  # noqa: F401  (the fixture `browser`)
    expect_live,
    number,
    open_dashboard,
)
from tests.e2e.conftest import Served
from tests.e2e.dashboard_servers import (  # noqa: F401  (the fixtures finished, live, site)
    create_job,
    dashboard_site,
    finished_server,
    job_state,
    jobs_now,
    live_server,
)
from tests.e2e.serve_dist import wait_until

# The first test of a module may wait for apt-get to install chromium (about a
# minute on a fresh machine): its setup counts in its timeout.
pytestmark = pytest.mark.timeout(300)


def test_every_view_loads_live_without_console_errors(browser: Browser, live: ServeProcess) -> None:
    serve = live
    base = serve.base
    page, console = open_dashboard(browser, base, serve.token)
    expect_live(page)
    for route in ROUTES:
        page.click(f'nav a[href="#/{route}"]')
        expect(page.locator(f'nav a[href="#/{route}"]')).to_have_attribute("aria-current", "page")
        expect(page.locator("main h1")).to_be_visible(timeout=WAIT_MS)
    expect_live(page)
    assert console.errors == []
    page.context.close()


def test_the_numbers_move_while_a_job_runs(
    browser: Browser, live: ServeProcess, site: Served
) -> None:
    serve = live
    base = serve.base
    page, console = open_dashboard(browser, base, serve.token)
    expect_live(page)
    with serve.client() as client:
        job_id = create_job(client, site, delay=0.3)
    total = page.locator("[data-testid=pages-total]")

    def shown() -> float:
        text = total.inner_text()
        return 0.0 if text == "—" else number(text)

    first = shown()
    wait_until(lambda: shown() > first, 30, "pages-total to grow")
    grown = shown()
    wait_until(lambda: shown() > grown, 30, "pages-total to grow again")
    expect(page.locator("[data-testid=pages-per-s]")).not_to_have_text("0", timeout=WAIT_MS)
    bandwidth = page.locator("[data-testid=bandwidth]")
    expect(bandwidth).to_have_text(re.compile(r"^[\d.,]+ [kMG]?B/s$"), timeout=WAIT_MS)
    expect(bandwidth).not_to_have_text("0 B/s")
    chart = page.locator("svg[data-testid=throughput-chart] polyline")
    expect(chart).to_have_count(1, timeout=WAIT_MS)
    expect(page.locator("svg[data-testid=status-chart] polygon.c2xx")).to_have_count(1)
    _assert_shown_within_1s(page)
    with serve.client() as client:
        client.post(f"/api/v1/jobs/{job_id}/cancel")
    assert console.errors == []
    page.context.close()


def _assert_shown_within_1s(page: Page, updates: int = 6) -> None:
    """From a snapshot's reading (its `at`) to the page showing it: under 1 s, each
    of ``updates`` times in a row (the server and the browser share one clock)."""
    lags = page.evaluate(
        """(updates) => new Promise((resolve) => {
            const status = document.querySelector('[data-testid=live-status]');
            const lags = [];
            new MutationObserver(() => {
                lags.push(Date.now() / 1000 - Number(status.dataset.at));
                if (lags.length === updates) resolve(lags);
            }).observe(status, { attributes: true, attributeFilter: ['data-at'] });
        })""",
        updates,
    )
    assert len(lags) == updates and max(lags) < 1.0, lags


def _row(page: Page, job_id: str):  # noqa: ANN202  (a Locator)
    return page.locator(f"table[data-testid=jobs-table] tr[data-job-id='{job_id}']")


def test_create_pause_resume_and_cancel_from_the_page(
    browser: Browser, live: ServeProcess, site: Served
) -> None:
    serve = live
    base = serve.base
    page, console = open_dashboard(browser, base, serve.token, route="jobs")
    before = {job["id"] for job in jobs_now(serve)}
    page.fill("#job-form [name=seeds]", "\n".join(site.seeds))
    page.fill("#job-form [name=delay]", "0.5")
    page.select_option("#job-form [name=scope]", "any")
    page.check("#job-form [name=allow_private]")
    page.click("#job-form button[type=submit]")
    wait_until(lambda: len(jobs_now(serve)) > len(before), 15, "the job the form created")
    created = jobs_now(serve)[0]
    assert created["id"] not in before and created["options"]["delay"] == 0.5
    assert created["options"]["scope"] == "any"
    row = _row(page, created["id"])
    expect(row.locator("[data-field=state]")).to_have_text("running", timeout=WAIT_MS)
    for action, state in (("pause", "paused"), ("resume", "running"), ("cancel", "cancelled")):
        button = row.locator(f"button[data-action={action}]")
        expect(button).to_be_enabled(timeout=WAIT_MS)
        button.click()
        expect(row.locator("[data-field=state]")).to_have_text(state, timeout=WAIT_MS)
        assert job_state(serve, created["id"]) == state
    for action in ("pause", "resume", "cancel"):  # a cancelled job allows none of them
        expect(row.locator(f"button[data-action={action}]")).to_be_disabled(timeout=WAIT_MS)
    assert console.errors == []
    page.context.close()


def test_the_form_checks_as_the_api_does_and_shows_its_error(
    browser: Browser, live: ServeProcess
) -> None:
    serve = live
    base = serve.base
    page, console = open_dashboard(browser, base, serve.token, route="jobs")
    error = page.locator("[data-testid=form-error]")
    page.fill("#job-form [name=seeds]", "ftp://example.com/")
    page.click("#job-form button[type=submit]")
    expect(error).to_contain_text("invalid seeds.0", timeout=WAIT_MS)
    page.fill("#job-form [name=seeds]", "http://example.com/")
    page.fill("#job-form [name=max_depth]", "-1")
    page.click("#job-form button[type=submit]")
    expect(error).to_contain_text("invalid max_depth")
    page.fill("#job-form [name=max_depth]", "")
    # The page lets a loopback seed through; the API refuses it without allow_private.
    page.fill("#job-form [name=seeds]", "http://127.0.0.1:9/")
    page.click("#job-form button[type=submit]")
    expect(error).to_contain_text("refused (allow_private)", timeout=WAIT_MS)
    expect(error).to_contain_text("invalid seeds.0")
    assert all(job["options"]["max_depth"] != -1 for job in jobs_now(serve))
    assert console.other_than(422) == []
    page.context.close()


def test_search_finds_the_page_and_links_to_the_url_view(
    browser: Browser, finished: tuple[ServeProcess, str]
) -> None:
    serve, site_base = finished
    base = serve.base
    page, console = open_dashboard(browser, base, serve.token, route="search")
    page.fill("#search-q", "harbour")
    page.press("#search-q", "Enter")
    results = page.locator("[data-testid=search-results] li")
    expect(results).to_have_count(1, timeout=WAIT_MS)
    link = results.locator("a.result-url")
    expect(link).to_have_text("Harbour pilot")
    expect(results.locator("mark")).to_have_text("harbour", ignore_case=True)
    link.click()
    expect(page.locator("[data-testid=url-normalised]")).to_have_text(f"{site_base}/a",
                                                                      timeout=WAIT_MS)  # fmt: skip
    expect(page.locator("[data-testid=url-state]")).to_have_text("done")
    expect(page.locator("[data-testid=url-fetches] tbody tr")).to_have_count(1)
    assert console.errors == []
    page.context.close()


def test_the_url_analyser_shows_the_deciding_robots_rule(
    browser: Browser, finished: tuple[ServeProcess, str]
) -> None:
    serve, site_base = finished
    base = serve.base
    page, console = open_dashboard(browser, base, serve.token, route="urls")
    page.fill("#url-input", f"{site_base}/private/x")
    page.press("#url-input", "Enter")
    expect(page.locator("[data-testid=robots-verdict]")).to_have_text("disallowed",
                                                                      timeout=WAIT_MS)  # fmt: skip
    expect(page.locator("[data-testid=robots-rule]")).to_have_text("Disallow: /private (line 2)")
    page.fill("#url-input", f"{site_base}/b")  # the check can fail: another URL is allowed
    page.press("#url-input", "Enter")
    expect(page.locator("[data-testid=robots-verdict]")).to_have_text("allowed", timeout=WAIT_MS)
    expect(page.locator("[data-testid=links-in]")).to_have_text("1")
    assert console.errors == []
    page.context.close()


def test_the_errors_feed_filters_by_code_and_host(
    browser: Browser, finished: tuple[ServeProcess, str]
) -> None:
    serve, site_base = finished
    base = serve.base
    page, console = open_dashboard(browser, base, serve.token, route="errors")
    rows = page.locator("[data-testid=errors-feed] tbody tr")
    expect(rows).to_have_count(2, timeout=WAIT_MS)  # the 404 and the 500
    codes = page.locator("#error-code option").all_inner_texts()
    assert len(codes) == 3, codes  # all, and the two codes
    page.select_option("#error-code", codes[1])
    expect(rows).to_have_count(1)
    page.select_option("#error-code", "")
    page.fill("#error-host", "no-such-host.example")
    expect(rows).to_have_count(0)
    page.fill("#error-host", site_base.split("//")[1].split(":")[0])
    expect(rows).to_have_count(2)
    assert console.errors == []
    page.context.close()


def test_hosts_and_the_host_page(browser: Browser, finished: tuple[ServeProcess, str]) -> None:
    serve, site_base = finished
    base = serve.base
    host = site_base.split("//")[1]
    page, console = open_dashboard(browser, base, serve.token, route="hosts")
    for testid in ("hosts-busiest", "hosts-slowest", "hosts-failing"):
        expect(page.locator(f"[data-testid={testid}] tbody tr[data-host='{host}']")).to_have_count(
            1, timeout=WAIT_MS)  # fmt: skip
    page.locator(f"[data-testid=hosts-busiest] tr[data-host='{host}'] a").click()
    expect(page.locator("[data-testid=host-robots]")).to_contain_text(f"{site_base}/robots.txt",
                                                                      timeout=WAIT_MS)  # fmt: skip
    expect(page.locator("[data-testid=robots-text]")).to_contain_text("Disallow: /private")
    fetches = page.locator("[data-testid=host-fetches] tbody tr")
    expect(fetches.first).to_contain_text(site_base, timeout=WAIT_MS)
    assert fetches.count() >= 4
    assert console.errors == []
    page.context.close()


def test_the_admin_view_edits_the_blocklist_and_politeness(
    browser: Browser, live: ServeProcess
) -> None:
    serve = live
    base = serve.base
    page, console = open_dashboard(browser, base, serve.token, route="admin")
    page.fill("#block-domain", "blocked.example")
    page.fill("#block-reason", "a test")
    page.click("#block-add")
    row = page.locator("[data-testid=blocklist] tr[data-domain='blocked.example']")
    expect(row).to_have_count(1, timeout=WAIT_MS)
    with serve.client() as client:
        assert [e["domain"] for e in client.get("/api/v1/admin/blocklist").json()] == [
            "blocked.example"]  # fmt: skip
    row.locator("button[data-action=unblock]").click()
    expect(row).to_have_count(0, timeout=WAIT_MS)
    page.fill("#pol-delay", "0.25")
    page.click("#pol-save")
    answer = page.locator("[data-testid=politeness-answer]")
    expect(answer).to_contain_text("delay 0.25", timeout=WAIT_MS)
    with serve.client() as client:
        assert client.get("/api/v1/admin/settings/politeness").json()["delay"] == 0.25
        client.put("/api/v1/admin/settings/politeness", json={})
    assert console.errors == []
    page.context.close()


def test_a_wrong_token_is_asked_again_and_the_right_one_kept(
    browser: Browser, live: ServeProcess
) -> None:
    serve = live
    base = serve.base
    page, console = open_dashboard(browser, base, "not-the-token")
    expect(page.locator("#token-why")).to_contain_text("refused", timeout=WAIT_MS)
    expect(page.locator("[data-testid=live-status]")).to_have_text("offline")
    page.fill("#token-input", serve.token)
    page.click("#token-save")
    expect_live(page)
    page.reload()  # kept for the browser session: not asked again
    expect_live(page)
    expect(page.locator("#token-dialog")).not_to_be_visible()
    assert console.errors and console.other_than(401) == []
    page.context.close()


def test_sse_parser_joins_events_split_across_chunks(browser: Browser, live: ServeProcess) -> None:
    serve = live
    base = serve.base
    page, _ = open_dashboard(browser, base, serve.token)
    got = page.evaluate("""async () => {
        const { parseEvents } = await import('/static/js/live.js');
        let [events, rest] = parseEvents('event: snapshot\\ndata: {"a":');
        const first = events.length;
        [events, rest] = parseEvents(rest + ' 1}\\n\\n: keep-alive\\n\\n'
            + 'event: problem\\r\\ndata: {}\\r\\n\\r\\nevent: x');
        return { first, names: events.map((e) => e.name), data: events[0].data, rest };
    }""")
    assert got == {"first": 0, "names": ["snapshot", "problem"], "data": '{"a": 1}',
                   "rest": "event: x"}  # fmt: skip
    page.context.close()


def test_the_stream_reconnects_when_the_server_comes_back(browser: Browser, tmp_path: Path) -> None:
    first = start_serve(tmp_path / "data", tmp_path / "serve1.log", token="a-test-token-1")
    port = first.base.rsplit(":", 1)[1]
    base = first.base
    page, console = open_dashboard(browser, base, first.token)
    status = page.locator("[data-testid=live-status]")
    expect_live(page)
    first.stop()
    expect(status).to_have_text("offline", timeout=WAIT_MS)
    again = start_serve(tmp_path / "data", tmp_path / "serve2.log", "--port", port,
                        token="a-test-token-1")  # fmt: skip
    try:
        expect(status).to_have_text("live", timeout=30_000)  # back-off: at most 15 s apart
    finally:
        again.stop()
    # The browser's own lines for the cut stream and its refused retries; no script error.
    assert all("/api/v1/events" in e for e in console.errors), console.errors
    page.context.close()


def test_the_exports_download_with_the_token(
    browser: Browser, finished: tuple[ServeProcess, str], tmp_path: Path
) -> None:
    serve = finished[0]
    base = serve.base
    job_id = jobs_now(serve)[0]["id"]
    page, console = open_dashboard(browser, base, serve.token, route="jobs", accept_downloads=True)
    row = _row(page, job_id)
    for fmt in ("jsonl", "csv"):
        with page.expect_download(timeout=WAIT_MS) as waiting:
            row.locator(f"a[data-action=export-{fmt}]").click()
        download = waiting.value
        assert download.suggested_filename == f"trawler-{job_id}.{fmt}"
        saved = tmp_path / download.suggested_filename
        download.save_as(saved)
        with serve.client() as client:
            expected = client.get(f"/api/v1/jobs/{job_id}/export", params={"format": fmt})
        assert saved.read_bytes() == expected.content and len(expected.content) > 100
    assert console.errors == []
    page.context.close()


def test_a_finished_job_is_recrawled_from_its_page(
    browser: Browser, live: ServeProcess, site: Served
) -> None:
    """The job page's Recrawl button: enabled once the job is finished, a revisit
    pass through the API, the job finished again after it (a later finished_at)."""
    serve = live
    with serve.client() as client:
        job_id = create_job(client, site, max_pages=5, delay=0.05)
    wait_until(lambda: job_state(serve, job_id) == "finished", 60, "the job to finish")
    first_end = finished_at(serve, job_id)
    page, console = open_dashboard(browser, serve.base, serve.token, route=f"jobs/{job_id}")
    detail = page.locator("[data-testid=job-detail]")
    button = detail.locator("button[data-action=recrawl]")
    expect(button).to_be_enabled(timeout=WAIT_MS)
    expect(detail.locator("button[data-action=resume]")).to_be_disabled()
    button.click()
    wait_until(lambda: (finished_at(serve, job_id) or 0) > first_end, 60, "the pass to end")
    expect(detail.locator("[data-field=state]")).to_have_text("finished", timeout=WAIT_MS)
    assert console.errors == []
    page.context.close()


def finished_at(serve: ServeProcess, job_id: str) -> float | None:
    with serve.client() as client:
        job = client.get(f"/api/v1/jobs/{job_id}").json()
    return job["finished_at"] if job["state"] == "finished" else None
