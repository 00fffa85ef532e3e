"""Recrawl end to end (issue 15): `trawler crawl`, then `trawler recrawl --continuous`
with a compressed window against a site whose pages change every second or never.
The server's access log is the witness for 304s and politeness."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from warcio.archiveiterator import ArchiveIterator

from tests.e2e.conftest import LoggedSite, job_data, run_trawler, start_logged_site
from trawler.recrawl import RevisitWindow
from trawler.store.warc_revisit import PROFILE_IDENTICAL, PROFILE_NOT_MODIFIED

pytestmark = pytest.mark.timeout(120)

DELAY_S = 0.2
CLOCK_SLACK_S = 0.015  # the server stamps arrivals in its own process, a little late
WINDOW = RevisitWindow(0.5, 20.0)
RECRAWL_S = 12.0


Site = LoggedSite


def start_site(tmp: Path, *extra: str) -> Site:
    """The changing site; ``extra``: its options (--pages, --births, --status-file)."""
    return start_logged_site(
        "tests.e2e.changing_site", tmp, "--robots-file", str(tmp / "robots.txt"), *extra
    )


@dataclass
class Recrawled:
    site: Site
    data: Path
    crawl_requests: int  # access-log lines of the first crawl
    recrawl: subprocess.CompletedProcess[str]

    def revisits(self) -> list[dict]:
        return self.site.log()[self.crawl_requests :]

    def db(self) -> sqlite3.Connection:
        return sqlite3.connect(job_data(self.data) / "trawler.db")


def crawl(site: Site, data: Path) -> None:
    out = run_trawler("crawl", site.seed, "--data", str(data), "--delay", str(DELAY_S),
                      "--allow-private", "--no-sitemaps", "-q")  # fmt: skip
    assert out.returncode == 0, out.stderr


@pytest.fixture(scope="module")
def recrawled(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Recrawled]:
    tmp = tmp_path_factory.mktemp("recrawl")
    site = start_site(tmp)
    try:
        data = tmp / "data"
        crawl(site, data)
        crawled = len(site.log())
        out = run_trawler(
            "recrawl", "--data", str(data), "--continuous", "--delay", str(DELAY_S),
            "--revisit-min", str(WINDOW.min_s), "--revisit-max", str(WINDOW.max_s),
            "--max-seconds", str(RECRAWL_S),
        )  # fmt: skip
        yield Recrawled(site, data, crawled, out)
    finally:
        site.process.terminate()
        site.process.wait(10)


def test_recrawl_ends_cleanly(recrawled: Recrawled) -> None:
    assert recrawled.recrawl.returncode == 0, recrawled.recrawl.stderr
    assert "revisits" in recrawled.recrawl.stderr


def test_unchanged_pages_answer_304(recrawled: Recrawled) -> None:
    never = [r for r in recrawled.revisits() if r["path"].startswith("/never-")]
    assert len({r["path"] for r in never}) == 3  # each was revisited
    assert all(r["status"] == 304 and r["if_none_match"] for r in never), never


def test_changed_pages_get_new_versions(recrawled: Recrawled) -> None:
    with recrawled.db() as conn:
        counts = dict(conn.execute("SELECT url, count(*) FROM page_versions GROUP BY url"))
    by_path = {url.rsplit("/", 1)[1]: n for url, n in counts.items()}
    assert all(by_path[f"fast-{i}"] >= 3 for i in range(3)), by_path
    assert all(by_path[f"never-{i}"] == 1 for i in range(3)), by_path
    assert by_path["plain"] == 1
    out = run_trawler("versions", f"{recrawled.site.seed}fast-0", "--data", str(recrawled.data))
    rows = [json.loads(line) for line in out.stdout.splitlines()]
    assert [row["version"] for row in rows] == list(range(1, by_path["fast-0"] + 1))
    assert len({row["content_sha256"] for row in rows}) == len(rows)  # each one different
    out = run_trawler("versions", "--data", str(recrawled.data), "--versions", "latest")
    latest = {row["url"]: row["version"] for row in map(json.loads, out.stdout.splitlines())}
    assert latest == counts  # every page once, at its newest version
    out = run_trawler("versions", "--data", str(recrawled.data))
    assert len(out.stdout.splitlines()) == sum(counts.values())  # the whole history


def test_export_latest_or_all_versions(recrawled: Recrawled) -> None:
    with recrawled.db() as conn:
        newest = dict(conn.execute(
            "SELECT url, content_sha256 FROM page_versions v WHERE version ="
            " (SELECT max(version) FROM page_versions WHERE url = v.url)"
        ))  # fmt: skip
        total = conn.execute("SELECT count(*) FROM page_versions").fetchone()[0]
    out = run_trawler("export", "--data", str(recrawled.data))
    latest = {row["url"]: row for row in map(json.loads, out.stdout.splitlines())}
    assert {url: row["content_sha256"] for url, row in latest.items() if url in newest} == newest
    assert latest[f"{recrawled.site.seed}fast-0"]["version"] > 1
    assert latest[f"{recrawled.site.seed}fast-0"]["depth"] == 1  # the crawl's own fields stay
    out = run_trawler("export", "--data", str(recrawled.data), "--versions", "all")
    every = [json.loads(line) for line in out.stdout.splitlines()]
    assert len([row for row in every if row["url"] in newest]) == total
    out = run_trawler("export", "--data", str(recrawled.data), "--format", "csv")
    assert out.stdout.splitlines()[0].endswith(",kind,version")


def test_parquet_export_carries_each_versions_text(recrawled: Recrawled, tmp_path: Path) -> None:
    import pyarrow.parquet as pq

    target = tmp_path / "all.parquet"
    out = run_trawler("export", "--data", str(recrawled.data), "--versions", "all",
                      "--format", "parquet", "-o", str(target))  # fmt: skip
    assert out.returncode == 0, out.stderr
    with recrawled.db() as conn:
        stored = conn.execute("SELECT url, version, text FROM page_versions").fetchall()
    texts = {(url, version): text for url, version, text in stored}
    rows = pq.read_table(target).to_pylist()
    fast = [row for row in rows if row["url"].endswith("/fast-0")]
    assert len(fast) > 2 and len({row["text"] for row in fast}) == len(fast)  # each differs
    for row in rows:
        if row["version"] is not None and row["version"] > 1:
            assert row["text"] == texts[(row["url"], row["version"])]


def test_estimated_rates_and_intervals_order_pages_by_change_rate(recrawled: Recrawled) -> None:
    # The rates are the estimator's (recrawl.py), whatever the policy. The intervals
    # scheduled are the optimal policy's (revisit_policy.py), which visits a page
    # changing too often for the fetch budget *less* than a slower one. Here it does
    # not: the budget is what the proportional schedule spends, ~1 fetch a second per
    # fast page (1/λ), and the never-changing pages are worth no fetch beyond one per
    # max, so the fast pages keep the whole budget between them. The site's pages
    # all change every second or never: unit tests (test_revisit_policy.py) cover
    # the fall past the peak.
    with recrawled.db() as conn:
        rows = conn.execute(
            "SELECT url, rate_per_s, next_visit_at - last_visit_at FROM revisit_state"
        ).fetchall()
    fast = [(rate, gap) for url, rate, gap in rows if "/fast-" in url]
    never = [(rate, gap) for url, rate, gap in rows if "/never-" in url]
    assert min(rate for rate, _ in fast) > 0 == max(rate for rate, _ in never), (fast, never)
    assert max(gap for _, gap in fast) < min(gap for _, gap in never), (fast, never)
    assert min(gap for _, gap in never) == pytest.approx(WINDOW.max_s)  # never changed: the max


def test_politeness_holds_in_server_log(recrawled: Recrawled) -> None:
    times = [r["t"] for r in recrawled.revisits()]
    assert len(times) >= 15
    gaps = [b - a for a, b in zip(times, times[1:], strict=False)]
    shortest = gaps.index(min(gaps))
    assert min(gaps) >= DELAY_S - CLOCK_SLACK_S, recrawled.revisits()[shortest : shortest + 2]


def test_revisit_records_in_warc(recrawled: Recrawled) -> None:
    profiles: dict[str, int] = {}
    warc_dir = job_data(recrawled.data) / "warc"
    for path in sorted(warc_dir.glob("trawler-revisit-*.warc.gz")):
        with path.open("rb") as f:
            for record in ArchiveIterator(f, check_digests=True):
                if record.rec_type == "revisit":
                    profile = record.rec_headers.get_header("WARC-Profile")
                    profiles[profile] = profiles.get(profile, 0) + 1
                    assert record.rec_headers.get_header("WARC-Refers-To-Target-URI")
                    assert record.rec_headers.get_header("WARC-Refers-To-Date")
    assert profiles.get(PROFILE_NOT_MODIFIED, 0) >= 3
    assert profiles.get(PROFILE_IDENTICAL, 0) >= 1  # /plain: no validators, same body
    cdxj = subprocess.run(
        [sys.executable, "-m", "cdxj_indexer.main", str(warc_dir)],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert cdxj.returncode == 0, cdxj.stderr
    revisits = [line for line in cdxj.stdout.splitlines() if '"mime": "warc/revisit"' in line]
    assert len(revisits) == sum(profiles.values())


def test_politeness_check_fails_without_delay(tmp_path: Path) -> None:
    """The gap check above, on a one-pass recrawl with --delay 0, must see closer requests."""
    site = start_site(tmp_path)
    try:
        data = tmp_path / "data"
        crawl(site, data)
        mark = len(site.log())
        out = run_trawler("recrawl", "--data", str(data), "--delay", "0")
        assert out.returncode == 0, out.stderr
        times = [r["t"] for r in site.log()[mark:]]
    finally:
        site.process.terminate()
        site.process.wait(10)
    assert len(times) == 9  # one pass: robots.txt, then every stored page once
    assert min(b - a for a, b in zip(times, times[1:], strict=False)) < DELAY_S - CLOCK_SLACK_S


def test_revisits_obey_robots_txt_as_it_is_now(tmp_path: Path) -> None:
    """A page disallowed since the crawl is not fetched again; robots.txt is read
    again first, spaced like the pages, and archived."""
    site = start_site(tmp_path)
    try:
        data = tmp_path / "data"
        crawl(site, data)
        (tmp_path / "robots.txt").write_text("User-agent: *\nDisallow: /never-0\n")
        mark = len(site.log())
        out = run_trawler("recrawl", "--data", str(data), "--delay", str(DELAY_S))
        revisits = site.log()[mark:]
    finally:
        site.process.terminate()
        site.process.wait(10)
    assert out.returncode == 0, out.stderr
    paths = [r["path"] for r in revisits]
    assert paths[0] == "/robots.txt" and "/never-0" not in paths and "/never-1" in paths
    assert "1 robots" in out.stderr
    with sqlite3.connect(job_data(data) / "trawler.db") as conn:
        rows = conn.execute("SELECT count(*) FROM robots_fetches WHERE status = 200").fetchone()
    assert rows[0] == 1


def test_recrawl_stops_on_sigterm(tmp_path: Path) -> None:
    site = start_site(tmp_path)
    try:
        data = tmp_path / "data"
        crawl(site, data)
        cmd = [sys.executable, "-m", "trawler", "recrawl", "--data", str(data), "--continuous",
               "--revisit-min", "0.5", "--revisit-max", "5", "--delay", "0.1"]  # fmt: skip
        process = subprocess.Popen(cmd, stderr=subprocess.PIPE, text=True)
        time.sleep(2.0)
        process.terminate()
        _out, err = process.communicate(timeout=20)
    finally:
        site.process.terminate()
        site.process.wait(10)
    assert process.returncode == 128 + 15, err
    assert "revisits" in err and "Traceback" not in err


def test_crawl_then_recrawl_continuously(tmp_path: Path) -> None:
    """`crawl --recrawl`: the same process revisits its pages as they come due, beside
    the crawl's new URLs, until SIGTERM: the never-changing pages come back as 304s
    after the crawl's 200s."""
    site = start_site(tmp_path)
    try:
        cmd = [sys.executable, "-m", "trawler", "crawl", site.seed, "--data",
               str(tmp_path / "data"), "--delay", "0.1", "--allow-private", "--no-sitemaps",
               "-q", "--recrawl", "--revisit-min", "0.5", "--revisit-max", "2"]  # fmt: skip
        process = subprocess.Popen(cmd, stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 30  # the 304s come ~2.1 s after the crawl
        while time.monotonic() < deadline and not any(
            r["status"] == 304 for r in site.log()
        ):  # fmt: skip
            time.sleep(0.2)
        process.terminate()
        _out, err = process.communicate(timeout=20)
        log = site.log()
    finally:
        site.process.terminate()
        site.process.wait(10)
    assert process.returncode == 128 + 15, err
    first = {r["path"]: r["status"] for r in reversed(log)}  # the first answer per path
    assert first["/never-0"] == 200
    assert any(r["path"].startswith("/never-") and r["status"] == 304 for r in log)


@pytest.mark.parametrize(
    "args",
    [
        ("recrawl", "--revisit-min", "0"),
        ("recrawl", "--revisit-min", "10", "--revisit-max", "5"),
        ("recrawl", "--revisit-max", "inf"),
        ("recrawl", "--max-seconds", "-1"),
        ("recrawl", "--revisit-policy", "eager"),
        ("versions", "--versions", "some"),
        ("export", "--versions", "newest"),
        ("crawl", "http://127.0.0.1:9/", "--recrawl", "--revisit-min", "-5"),
        ("crawl", "http://127.0.0.1:9/", "--recrawl", "--revisit-policy", "eager"),
    ],
)
def test_bad_values_exit_2(args: tuple[str, ...], tmp_path: Path) -> None:
    out = run_trawler(*args, "--data", str(tmp_path / "data"))
    assert out.returncode == 2, out
    assert len(out.stderr.strip().splitlines()) == 1 and "Traceback" not in out.stderr
    assert not (tmp_path / "data").exists()
