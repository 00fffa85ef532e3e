"""--render beyond `trawler crawl`: jobs of `trawler serve` (many in one process, one
browser for all), `trawler submit` + `trawler worker`, and what ``auto`` learnt of a
host kept across a restart. Real servers on loopback, Debian's chromium; judged from
the JavaScript site's access log (tests/e2e/js_site.py) and the stored pages."""

from __future__ import annotations

import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from urllib.parse import urlsplit

import httpx2
import pytest

from tests.e2e.api_server import ServeProcess, serving
from tests.e2e.backends import TRAWLER, DistributedCrawls, open_backend
from tests.e2e.browser import chromium
from tests.e2e.conftest import LoggedSite, export_rows, start_logged_site
from tests.e2e.js_site import DULL_PAGES, REACHABLE, ROUTES
from tests.e2e.test_render_crawl import DELAY_S, arrivals, overlaps, short_gaps
from tests.servers import ServerUnavailable, unavailable
from trawler.config import CrawlConfig
from trawler.render.browser import _proc_entries

pytestmark = pytest.mark.timeout(240)

TOKEN = "render-jobs-token"
MISSES_TO_STOP = CrawlConfig().render_host_misses  # the default of --render auto
RENDER = ["--render", "auto", "--render-timeout", "4", "--delay", str(DELAY_S), "--no-sitemaps"]


@pytest.fixture
def site(tmp_path: Path) -> Iterator[LoggedSite]:
    try:
        chromium()
    except ServerUnavailable as exc:
        unavailable("chromium", exc)
    served = start_logged_site("tests.e2e.js_site", tmp_path, "--port", "0")
    yield served
    served.process.terminate()
    served.process.wait(10)


def by_path(rows: list[dict]) -> dict[str, dict]:
    return {urlsplit(r["url"]).path: r for r in rows if r["kind"] == "page"}


def assert_polite(site: LoggedSite) -> None:
    """One request at a time to the site, spaced by the delay, pages and scripts alike."""
    log = site.log()
    assert short_gaps(arrivals(log), DELAY_S) == []
    assert overlaps(log) == []


def assert_learnt_once(rows: dict[str, dict]) -> None:
    """The dull chain: rendered until MISSES_TO_STOP renders added nothing, then not."""
    decisions = [rows[f"/dull/{n}"]["rendered"] for n in range(DULL_PAGES)]
    stop = MISSES_TO_STOP
    assert decisions == ["yes"] * stop + ["no_host_learned"] * (DULL_PAGES - stop), decisions


# -- trawler serve ---------------------------------------------------------------------
@pytest.fixture
def api(tmp_path: Path) -> Iterator[ServeProcess]:
    yield from serving(tmp_path / "data", tmp_path, TOKEN)


def browsers_of(pid: int) -> int:
    """Chromium browser processes (not its renderers or helpers) under ``pid``."""
    children: dict[int, list[int]] = {}
    for child, _comm, parent in _proc_entries():
        children.setdefault(parent, []).append(child)
    found, stack = 0, [pid]
    while stack:
        for child in children.get(stack.pop(), []):
            stack.append(child)
            found += _is_browser(child)
    return found


def _is_browser(pid: int) -> bool:
    """Chromium may rewrite its argv as one string: read it as words."""
    try:
        words = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").split()
    except OSError:
        return False
    return (
        bool(words)
        and words[0].endswith(b"/chromium")
        and not any(word.startswith(b"--type=") for word in words)
    )


def wait_finished(client: httpx2.Client, ids: list[str], each_poll: Callable[[], None]) -> None:
    deadline = time.monotonic() + 180
    while any(client.get(f"/api/v1/jobs/{i}").json()["state"] != "finished" for i in ids):
        assert time.monotonic() < deadline, "jobs did not finish"
        each_poll()
        time.sleep(0.1)


def api_rows(client: httpx2.Client, job_id: str) -> dict[str, dict]:
    answer = client.get(f"/api/v1/jobs/{job_id}/pages", params={"limit": 1000})
    assert answer.status_code == 200, answer.text
    return by_path(answer.json()["pages"])


def test_serve_renders_the_jobs_of_the_api_with_one_browser(
    site: LoggedSite, api: ServeProcess
) -> None:
    """Two jobs at once in one `trawler serve`: both render (the shop and the dull
    chain), one chromium serves both, politeness holds over the two jobs' requests."""
    options = {"allow_private": True, "delay": DELAY_S, "sitemaps": False, "render": "auto",
               "render_timeout": 4, "render_concurrency": 1}  # fmt: skip
    seen: list[int] = []
    with api.client() as client:
        ids = []
        for seed in (site.seed, site.seed + "dull/0"):
            answer = client.post("/api/v1/jobs", json={"seeds": [seed], **options})
            assert answer.status_code == 201, answer.text
            ids.append(answer.json()["id"])
        wait_finished(client, ids, lambda: seen.append(browsers_of(api.process.pid)))
        shop, dull = api_rows(client, ids[0]), api_rows(client, ids[1])
    assert max(seen) == 1, seen  # one browser for both jobs (each its own: 2)
    assert set(shop) == REACHABLE
    for path in ROUTES:
        assert shop[path]["rendered"] == "yes", path
    assert shop["/static"]["rendered"] == "no" and shop["/hang"]["rendered"] == "failed"
    assert_learnt_once(dull)
    assert_polite(site)


def test_the_api_names_a_bad_render_option(api: ServeProcess) -> None:
    with api.client() as client:
        answer = client.post("/api/v1/jobs", json={"seeds": ["http://127.0.0.1/"],
                                                   "render": "sometimes"})  # fmt: skip
        timeout = client.post("/api/v1/jobs", json={"seeds": ["http://127.0.0.1/"],
                                                    "render_timeout": 0})  # fmt: skip
    assert answer.status_code == 422 and answer.json()["detail"][0]["loc"] == ["body", "render"]
    assert timeout.status_code == 422
    assert timeout.json()["detail"][0]["loc"] == ["body", "render_timeout"]


# -- trawler submit + trawler worker -----------------------------------------------------
@pytest.fixture
def distributed(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[DistributedCrawls]:
    backend = open_backend(request, "distributed", tmp_path)
    assert isinstance(backend, DistributedCrawls)
    yield backend
    backend.stop()


def test_workers_render_a_submitted_job_politely(
    site: LoggedSite, distributed: DistributedCrawls
) -> None:
    """Two workers share the job: every page a user could click to, the decision in
    PostgreSQL's pages.rendered, one request at a time to the host across both."""
    crawled = distributed.crawl([site.seed], *RENDER, timeout_s=180)
    assert crawled.returncode == 0, crawled.stderr
    rows = by_path(crawled.export())
    assert set(rows) == REACHABLE
    for path in ROUTES:
        assert rows[path]["rendered"] == "yes", path
    assert rows["/static"]["rendered"] == "no" and rows["/hang"]["rendered"] == "failed"
    assert_polite(site)


# -- what auto learnt, across a restart ------------------------------------------------------
def stop_when_requested(process: subprocess.Popen, site: LoggedSite, path: str) -> None:
    """SIGTERM ``process`` once the site has been asked for ``path`` (it stops cleanly)."""
    deadline = time.monotonic() + 90
    while path not in {entry["path"] for entry in site.log()}:
        assert process.poll() is None, "it ended before it was stopped"
        assert time.monotonic() < deadline, f"{path} never requested"
        time.sleep(0.05)
    process.send_signal(signal.SIGTERM)
    process.wait(60)


def renders_before_restart(rows_before: list[dict]) -> int:
    return sum(r["rendered"] == "yes" for r in by_path(rows_before).values())


def test_an_embedded_crawl_keeps_what_auto_learnt_across_a_restart(
    site: LoggedSite, tmp_path: Path
) -> None:
    """Stopped after a few renders of the chain, the resumed crawl renders only as many
    more as make MISSES_TO_STOP in all (without the kept count: that many again)."""
    data = tmp_path / "data"
    cmd = [*TRAWLER, "crawl", site.seed + "dull/0", "--data", str(data), *RENDER,
           "--allow-private", "-q"]  # fmt: skip
    first = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    stop_when_requested(first, site, "/dull/2")
    before = renders_before_restart(export_rows(data))
    assert 2 <= before < MISSES_TO_STOP  # the restart came while it was learning
    resumed = subprocess.run([*TRAWLER, "crawl", "--data", str(data), "-q"], timeout=180,
                             capture_output=True, text=True)  # fmt: skip
    assert resumed.returncode == 0, resumed.stderr
    assert_learnt_once(by_path(export_rows(data)))


def test_workers_share_what_auto_learnt_across_a_restart(
    site: LoggedSite, distributed: DistributedCrawls, tmp_path: Path
) -> None:
    """A worker stopped while learning; the next worker of the job carries the count on."""
    from tests.e2e.conftest import run_trawler

    connect = ["--redis", distributed.redis_url, "--postgres", distributed.postgres_url]
    out = run_trawler("submit", site.seed + "dull/0", *connect, *RENDER, "--allow-private")
    assert out.returncode == 0, out.stderr
    job = out.stdout.strip().splitlines()[-1]
    worker = [*TRAWLER, "worker", *connect, "--warc-dir", str(tmp_path / "warc")]
    first = subprocess.Popen(worker, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    stop_when_requested(first, site, "/dull/2")
    export = ["export", "--postgres", distributed.postgres_url, "--job", job, "--format", "jsonl"]
    before = run_trawler(*export)
    assert 2 <= renders_before_restart(rows_of(before.stdout)) < MISSES_TO_STOP
    second = subprocess.run([*worker, "--exit-when-idle"], timeout=180, capture_output=True,
                            text=True)  # fmt: skip
    assert second.returncode == 0, second.stderr
    assert_learnt_once(by_path(rows_of(run_trawler(*export).stdout)))


def rows_of(jsonl: str) -> list[dict]:
    import json

    return [json.loads(line) for line in jsonl.splitlines()]
