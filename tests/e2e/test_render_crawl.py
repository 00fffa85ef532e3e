"""`trawler crawl --render` against a site of JavaScript-only pages (tests/e2e/js_site.py)
over real HTTP on loopback: what a user could reach by clicking is crawled, static
pages are not rendered, the server's own log shows politeness held for pages and
subresources alike, and a page that never finishes loading costs itself only."""

from __future__ import annotations

import sqlite3
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from itertools import pairwise
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from warcio.archiveiterator import ArchiveIterator

from tests.e2e.browser import chromium
from tests.e2e.conftest import LoggedSite, export_rows, job_data, run_trawler, start_logged_site
from tests.e2e.js_site import REACHABLE, ROUTES
from tests.servers import ServerUnavailable, unavailable

pytestmark = pytest.mark.timeout(180)

DELAY_S = 0.2
# The server stamps a request as it reached its socket (js_site.arrived_at); the
# client stamps its send.
LOG_JITTER_S = 0.01


def start_js_site(tmp: Path) -> LoggedSite:
    return start_logged_site("tests.e2e.js_site", tmp, "--port", "0")


@dataclass
class Crawled:
    site: LoggedSite
    data: Path
    out: subprocess.CompletedProcess[str]
    rows: dict[str, dict]  # by path


def crawl(tmp: Path, site: LoggedSite, render: str) -> Crawled:
    data = tmp / f"data-{render}"
    out = run_trawler(
        "crawl", site.seed, "--data", str(data), "--render", render, "--delay", str(DELAY_S),
        "--render-timeout", "4", "--allow-private", "--no-sitemaps", "-q",
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    rows = {urlsplit(r["url"]).path: r for r in export_rows(data) if r["kind"] == "page"}
    return Crawled(site, data, out, rows)


@pytest.fixture(scope="module", name="auto")
def auto_crawl(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Crawled]:
    try:
        chromium()
    except ServerUnavailable as exc:
        unavailable("chromium", exc)
    tmp = tmp_path_factory.mktemp("render")
    site = start_js_site(tmp)
    try:
        yield crawl(tmp, site, "auto")
    finally:
        site.process.terminate()
        site.process.wait(10)


def test_auto_reaches_every_page_a_user_could_click_to(auto: Crawled) -> None:
    assert set(auto.rows) == REACHABLE
    for path in ROUTES:  # links and text made by script, router links with pushState
        assert auto.rows[path]["rendered"] == "yes", path
    assert "described at length" in stored_text(auto.data, auto.rows["/products/1"]["url"])
    # The feed's links came from scrolling: two pages of items.
    assert {"/items/1", "/items/4"} <= set(auto.rows)


def stored_text(data: Path, url: str) -> str:
    with sqlite3.connect(job_data(data) / "trawler.db") as conn:
        return conn.execute("SELECT text FROM pages WHERE url = ?", (url,)).fetchone()[0]


def test_static_pages_are_not_rendered(auto: Crawled) -> None:
    for path in ("/static", "/items/1", "/items/2", "/items/3", "/items/4"):
        assert auto.rows[path]["rendered"] == "no", path


def test_a_page_that_never_finishes_loading_times_out_and_the_crawl_goes_on(
    auto: Crawled,
) -> None:
    hung = auto.rows["/hang"]
    assert hung["rendered"] == "failed" and hung["status"] == 200  # its static page kept
    hung_at = hung["fetched_at"]
    assert any(row["fetched_at"] > hung_at for row in auto.rows.values())


def test_subresources_keep_to_robots_txt_the_host_and_no_media(auto: Crawled) -> None:
    log = auto.site.log()
    paths = {entry["path"] for entry in log}
    assert "/app.js" in paths and "/api/links.json" in paths and "/api/feed?page=2" in paths
    assert not {p for p in paths if p.startswith("/private/")}  # robots.txt: Disallow
    assert not paths & {"/logo.png", "/clip.mp4"}  # images and media are never loaded
    assert {entry["host"] for entry in log} == {urlsplit(auto.site.seed).netloc}  # no 3rd party
    assert log[0]["path"] == "/robots.txt"


def test_a_script_is_fetched_once_for_every_page_that_loads_it(auto: Crawled) -> None:
    """Seven rendered pages load /app.js; the job's cache answers all but the first."""
    asked = [entry["path"] for entry in auto.site.log() if "end" not in entry]
    assert asked.count("/app.js") == 1


def arrivals(log: list[dict]) -> list[float]:
    return [entry["start"] for entry in log if "end" not in entry]


def short_gaps(starts: list[float], interval_s: float) -> list[float]:
    """Start-to-start gaps shorter than the host's interval."""
    return [b - a for a, b in pairwise(starts) if b - a < interval_s - LOG_JITTER_S]


def overlaps(log: list[dict]) -> list[str]:
    """Requests that arrived while another one was still being answered. A request
    whose answer never came is left out: the client dropped its connection (the
    hung script), and the server only finds out when it writes."""
    answered = sorted((e["start"], e["end"], e["path"]) for e in log if "end" in e)
    return [path for (_, end, _), (start, _, path) in pairwise(answered) if start < end]


def test_the_server_log_shows_one_request_at_a_time_spaced_by_the_delay(auto: Crawled) -> None:
    log = auto.site.log()
    # pages and their subresources (robots.txt, app.js once: cached, links.json at least)
    assert len(arrivals(log)) >= len(REACHABLE) + 3
    assert short_gaps(arrivals(log), DELAY_S) == []
    assert overlaps(log) == []


def test_the_log_checks_can_fail() -> None:
    """The checks above, on a log that broke both rules."""
    log = [
        {"path": "/", "start": 10.0}, {"path": "/", "start": 10.0, "end": 10.3},
        {"path": "/app.js", "start": 10.1}, {"path": "/app.js", "start": 10.1, "end": 10.2},
    ]  # fmt: skip
    assert short_gaps(arrivals(log), DELAY_S) and overlaps(log) == ["/app.js"]


def test_the_warc_holds_the_response_the_rendered_dom_and_the_subresources(
    auto: Crawled,
) -> None:
    records = []
    for path in sorted((job_data(auto.data) / "warc").glob("*.warc.gz")):
        with path.open("rb") as file:
            for record in ArchiveIterator(file):
                headers = record.rec_headers
                body = record.content_stream().read()
                records.append((headers.get_header("WARC-Type"), headers, body))
    responses = {h.get_header("WARC-Record-ID"): h for t, h, _ in records if t == "response"}
    conversions = [(h, body) for t, h, body in records if t == "conversion"]
    assert len(conversions) == sum(r["rendered"] == "yes" for r in auto.rows.values())
    for headers, body in conversions:
        original = responses[headers.get_header("WARC-Refers-To")]
        assert original.get_header("WARC-Target-URI") == headers.get_header("WARC-Target-URI")
        assert headers.get_header("Content-Type") == "text/html; charset=utf-8"
        assert b'id="root"><h1>' in body  # the DOM, not the shell
    targets = {h.get_header("WARC-Target-URI").split("/", 3)[3] for h in responses.values()}
    assert {"app.js", "api/links.json", "api/feed?page=1"} <= targets


def test_never_renders_nothing_and_records_no_decision(tmp_path: Path) -> None:
    site = start_js_site(tmp_path)
    try:
        never = crawl(tmp_path, site, "never")
    finally:
        site.process.terminate()
        site.process.wait(10)
    assert set(never.rows) == {"/"}  # the shell's links exist only for a browser
    assert never.rows["/"]["rendered"] is None
    assert "/app.js" not in {entry["path"] for entry in site.log()}


def test_all_fetches_other_hosts_subresources_under_their_own_robots_and_slot(
    tmp_path: Path,
) -> None:
    try:
        chromium()
    except ServerUnavailable as exc:
        unavailable("chromium", exc)
    site = start_js_site(tmp_path)
    try:
        out = run_trawler(
            "crawl", site.seed, "--data", str(tmp_path / "data"), "--render", "always",
            "--render-resources", "all", "--max-pages", "1", "--delay", str(DELAY_S),
            "--allow-private", "--no-sitemaps", "-q",
        )  # fmt: skip
    finally:
        site.process.terminate()
        site.process.wait(10)
    assert out.returncode == 0, out.stderr
    other = f"localhost:{urlsplit(site.seed).port}"  # another host key, the same server
    log = site.log()
    assert [e["path"] for e in log if e["host"] == other and "end" not in e] == [
        "/robots.txt",
        "/third-party.js",
    ]
    for host in {e["host"] for e in log}:  # two hosts: each polite, not the two apart
        of_host = [e for e in log if e["host"] == host]
        assert overlaps(of_host) == [], (host, log)
        assert short_gaps(arrivals(of_host), DELAY_S) == [], (host, log)
