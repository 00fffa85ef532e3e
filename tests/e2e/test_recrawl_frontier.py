"""Revisits through the crawl's frontier (issue 15): they share each host's politeness
with new URLs, take at most every other turn of a host that has new URLs, back off on
429/503, mark 404s gone, feed links of changed pages to the frontier, survive kill -9,
and a continuous job keeps revisiting after a restart. The server's log is the witness."""

from __future__ import annotations

import json
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from warcio.archiveiterator import ArchiveIterator

from tests.e2e.conftest import job_data, run_trawler, until
from tests.e2e.test_recrawl import CLOCK_SLACK_S, Site, crawl, start_site

pytestmark = pytest.mark.timeout(150)

NEW_PAGES = 40


def _trawler(*args: str) -> subprocess.Popen[str]:
    cmd = [sys.executable, "-m", "trawler", *args]
    return subprocess.Popen(cmd, stderr=subprocess.PIPE, text=True)


def _stop(process: subprocess.Popen[str]) -> str:
    process.send_signal(signal.SIGTERM)
    _out, err = process.communicate(timeout=30)
    return err


def _continuous_crawl(site: Site, data: Path, delay_s: float, *extra: str) -> list[str]:
    return ["crawl", site.seed, "--data", str(data), "--delay", str(delay_s), "--allow-private",
            "--no-sitemaps", "-q", "--recrawl", *extra]  # fmt: skip


def _page_requests(log: list[dict]) -> list[tuple[dict, bool]]:
    """(request, is a revisit) of each page request, robots.txt left out."""
    seen: set[str] = set()
    requests = []
    for record in log:
        if record["path"] == "/robots.txt":
            continue
        requests.append((record, record["path"] in seen))
        seen.add(record["path"])
    return requests


def _continuous_job(
    request: pytest.FixtureRequest, backend: str, site: Site, tmp: Path, delay_s: float,
    *extra: str,
) -> Callable[[], tuple[int, str]]:  # fmt: skip
    """A continuous job running: `crawl --recrawl`, or `submit --recrawl` and two
    workers (test_recrawl_distributed.py); returns what stops it (exit status, stderr)."""
    if backend == "embedded":
        process = _trawler(*_continuous_crawl(site, tmp / "data", delay_s, *extra))

        def stop() -> tuple[int, str]:
            err = _stop(process)
            return process.returncode, err

        return stop

    from tests.e2e.test_recrawl_distributed import start_workers

    return start_workers(request, site, tmp, delay_s, *extra)


@pytest.mark.parametrize("backend", ["embedded", "distributed"])
@pytest.mark.parametrize("delay_s", [0.1, 0.0])
def test_revisits_share_the_host_with_new_urls(
    tmp_path: Path, delay_s: float, backend: str, request: pytest.FixtureRequest
) -> None:
    """A host with 40 new pages and pages come due: new pages and revisits take turns
    (never two revisits in a row while new pages wait), every gap in the server's log
    is at least --delay; with --delay 0 the same check sees closer requests. Embedded,
    and distributed: two workers share the host through Redis."""
    site = start_site(tmp_path, "--pages", str(NEW_PAGES))
    try:
        stop = _continuous_job(request, backend, site, tmp_path, delay_s,
                               "--revisit-min", "0.3", "--revisit-max", "1.2")  # fmt: skip
        total = 1 + 3 + 3 + 1 + NEW_PAGES
        until(lambda: len({r["path"] for r in site.log()}) >= total + 1, 60)
        time.sleep(1.0)
        returncode, err = stop()
        log = site.log()
    finally:
        site.process.terminate()
        site.process.wait(10)
    assert returncode == 128 + 15, err
    times = [r["t"] for r in log]
    gaps = [b - a for a, b in zip(times, times[1:], strict=False)]
    if delay_s == 0:
        assert min(gaps) < 0.1 - CLOCK_SLACK_S  # the gap check below can fail
        return
    assert min(gaps) >= delay_s - CLOCK_SLACK_S, log[gaps.index(min(gaps)) :][:2]
    requests = _page_requests(log)
    last_new = max(i for i, (_r, revisit) in enumerate(requests) if not revisit)
    while_new = [revisit for _r, revisit in requests[: last_new + 1]]
    assert sum(while_new) >= 5, [r["path"] for r, _ in requests]  # revisits did not wait
    pairs = list(zip(while_new, while_new[1:], strict=False))
    assert (True, True) not in pairs, [r["path"] for r, _ in requests]  # discovery's turns


def test_503_backs_off_and_404_marks_gone(tmp_path: Path) -> None:
    """After the crawl /never-1 answers 503 (Retry-After: 2) and /never-2 404: the host
    waits before its next request, /never-1 is asked again later and never counted as a
    change; /never-2's latest version is marked gone and its revisits go to --revisit-max."""
    status_file = tmp_path / "status.json"
    site = start_site(tmp_path, "--status-file", str(status_file))
    try:
        data = tmp_path / "data"
        crawl(site, data)
        status_file.write_text(json.dumps({"/never-1": 503, "/never-2": 404}))
        mark = len(site.log())
        # 12 s: after the 503 the host's extra interval (2 s) recovers by halves, and the
        # pages due before /never-1 come first: its second 503 comes ~7-9 s in (7 s ended
        # the run before it).
        out = run_trawler("recrawl", "--data", str(data), "--continuous", "--delay", "0.1",
                          "--revisit-min", "0.5", "--revisit-max", "3",
                          "--max-seconds", "12")  # fmt: skip
        log = site.log()[mark:]
    finally:
        site.process.terminate()
        site.process.wait(10)
    assert out.returncode == 0, out.stderr
    slow = [i for i, r in enumerate(log) if r["status"] == 503]
    assert len(slow) >= 2, [(r["t"], r["path"], r["status"]) for r in log]  # revisited later
    for i in slow[:-1]:
        assert log[i + 1]["t"] - log[i]["t"] >= 1.5, log[i : i + 2]  # Retry-After: 2
    with sqlite3.connect(job_data(data) / "trawler.db") as conn:
        verdicts = dict(conn.execute(
            "SELECT url, group_concat(DISTINCT verdict) FROM visits GROUP BY url"
        ))  # fmt: skip
        gone = conn.execute(
            "SELECT next_visit_at - last_visit_at FROM revisit_state WHERE url LIKE '%/never-2'"
        ).fetchone()[0]
    assert verdicts[f"{site.seed}never-1"] == "failed"
    assert verdicts[f"{site.seed}never-2"] == "gone"
    assert gone == pytest.approx(3.0)
    out = run_trawler("versions", f"{site.seed}never-2", "--data", str(data))
    rows = [json.loads(line) for line in out.stdout.splitlines()]
    assert [(r["version"], r["status"], r["gone"]) for r in rows] == [(1, 200, False),
                                                                      (2, 404, True)]  # fmt: skip
    out = run_trawler("export", "--data", str(data))
    exported = {row["url"]: row for row in map(json.loads, out.stdout.splitlines())}
    assert exported[f"{site.seed}never-2"]["status"] == 404
    assert exported[f"{site.seed}never-1"]["status"] == 200  # a 503 is no new version


def test_a_redirect_on_revisit_sends_its_target_to_the_frontier(tmp_path: Path) -> None:
    """/never-0 moved since the crawl: the visit is recorded as redirected (no new
    version), and the target is queued in the job's frontier like a discovered link."""
    status_file = tmp_path / "status.json"
    site = start_site(tmp_path, "--status-file", str(status_file))
    try:
        data = tmp_path / "data"
        crawl(site, data)
        status_file.write_text(json.dumps({"/never-0": [301, "/moved-0"]}))
        out = run_trawler("recrawl", "--data", str(data), "--delay", "0.05")
    finally:
        site.process.terminate()
        site.process.wait(10)
    assert out.returncode == 0, out.stderr
    with sqlite3.connect(job_data(data) / "trawler.db") as conn:
        verdict = conn.execute("SELECT verdict FROM visits WHERE url LIKE '%/never-0'").fetchone()
        queued = conn.execute("SELECT depth FROM urls WHERE url LIKE '%/moved-0'").fetchall()
        versions = conn.execute(
            "SELECT count(*) FROM page_versions WHERE url LIKE '%/never-0'"
        ).fetchone()
    assert verdict == ("redirected",)
    assert queued == [(1,)]  # the redirect's depth: the page's own
    assert versions == (1,)


def test_new_page_linked_from_changed_page_is_crawled(tmp_path: Path) -> None:
    """Each edition of /fast-0 links to a page born with it: a continuous crawl finds
    them through the revisits, at the depth below /fast-0."""
    site = start_site(tmp_path, "--births")
    try:
        data = tmp_path / "data"
        process = _trawler(*_continuous_crawl(site, data, 0.1, "--revisit-min", "0.5",
                                              "--revisit-max", "2"))  # fmt: skip

        def born() -> set[str]:
            return {r["path"] for r in site.log() if r["path"].startswith("/born-")}

        until(lambda: len(born()) >= 3, 40)
        err = _stop(process)
    finally:
        site.process.terminate()
        site.process.wait(10)
    assert process.returncode == 128 + 15, err
    assert len(born()) >= 3, site.log()
    with sqlite3.connect(job_data(data) / "trawler.db") as conn:
        depths = {d for (d,) in conn.execute("SELECT depth FROM pages WHERE url LIKE '%/born-%'")}
    assert depths == {2}


def test_kill_during_revisits_loses_nothing(tmp_path: Path) -> None:
    """kill -9 while revisits run: every page keeps its revisit row, versions stay
    numbered 1..n with each differing from the one before, the WARC files read back
    whole, and the next run revisits every page."""
    site = start_site(tmp_path)
    try:
        data = tmp_path / "data"
        crawl(site, data)
        mark = len(site.log())
        process = _trawler("recrawl", "--data", str(data), "--continuous", "--delay", "0.05",
                           "--revisit-min", "0.3", "--revisit-max", "1")  # fmt: skip
        until(lambda: len(site.log()) - mark >= 25, 40)
        process.kill()
        process.communicate(timeout=20)
        restart = len(site.log())
        out = run_trawler("recrawl", "--data", str(data), "--delay", "0.05")
        after = {r["path"] for r in site.log()[restart:]}
    finally:
        site.process.terminate()
        site.process.wait(10)
    assert len(site.log()) - mark >= 25
    assert out.returncode == 0, out.stderr
    pages = {"/", "/plain"} | {f"/{k}-{i}" for k in ("fast", "never") for i in range(3)}
    assert pages <= after
    with sqlite3.connect(job_data(data) / "trawler.db") as conn:
        assert conn.execute("SELECT count(*) FROM revisit_state").fetchone()[0] == len(pages)
        rows = conn.execute(
            "SELECT url, version, content_sha256 FROM page_versions ORDER BY url, version"
        ).fetchall()
    by_url: dict[str, list[tuple[int, str]]] = {}
    for url, version, sha in rows:
        by_url.setdefault(url, []).append((version, sha))
    for url, versions in by_url.items():
        assert [v for v, _ in versions] == list(range(1, len(versions) + 1)), url
        shas = [s for _, s in versions]
        assert all(a != b for a, b in zip(shas, shas[1:], strict=False)), url
    for path in (job_data(data) / "warc").glob("*.warc.gz"):
        with path.open("rb") as f:
            assert sum(1 for _ in ArchiveIterator(f, check_digests=True)) > 0


def test_recrawl_is_kept_with_the_job(tmp_path: Path) -> None:
    """`crawl --recrawl` stopped by SIGTERM: `jobs show` names it, and a plain
    `crawl --data` (resume) goes on revisiting: 304s after the restart."""
    site = start_site(tmp_path)
    try:
        data = tmp_path / "data"
        args = _continuous_crawl(site, data, 0.1, "--revisit-min", "0.5", "--revisit-max", "2")
        process = _trawler(*args)
        until(lambda: any(r["status"] == 304 for r in site.log()), 30)
        _stop(process)
        listed = run_trawler("jobs", "list", "--data", str(data), "--json")
        job_id = json.loads(listed.stdout)["jobs"][0]["id"]
        shown = run_trawler("jobs", "show", job_id, "--data", str(data), "--json")
        mark = len(site.log())
        process = _trawler("crawl", "--data", str(data), "-q")
        until(lambda: any(r["status"] == 304 for r in site.log()[mark:]), 30)
        err = _stop(process)
        resumed = site.log()[mark:]
    finally:
        site.process.terminate()
        site.process.wait(10)
    assert process.returncode == 128 + 15, err
    assert any(r["status"] == 304 for r in resumed), resumed
    options = json.loads(shown.stdout)["options"]
    assert (options["recrawl"], options["revisit_min_s"], options["revisit_max_s"]) == (
        True, 0.5, 2.0,
    )  # fmt: skip
